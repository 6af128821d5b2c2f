"""Comparing runs: each run's instance reduced to one verdict by its headline (build.py
headline_verdicts: one row's verdict, or with epochs the first reducer's value, as read by
load.read_run), paired by id over the ids both runs selected that both finished with a verdict
(the others are counted, not paired: `n_left_out`). The delta's interval is stats.paired_delta's.
Runs of another dataset (run.json's dataset_fingerprint) or another selection (selected.json's
ids) are not compared unless forced: the comparison says why, with no delta. Without a common
instance there is no delta either.

Whether the difference is distinguishable from noise (report/significance.py): pass/fail verdicts by the exact
McNemar test of the fixed and broken counts, graded values (with epochs, each instance's pass rate under the
headline reducer) by a paired bootstrap interval; at alpha 0.05. When either run has a measured noise floor
(DIR/noise.json, `harness noise`: report/noise.py), the difference must also reach the minimum detectable
difference its flip rate gives at the paired size (the larger of the two runs'), and the comparison says which
floor it used. Every id either run selected is fixed, broken, unchanged or not comparable (counted, never
dropped). With `calls`, what makes the runs' calls comparable is read from their traces (report/calls.py): an
alias re-pointed, another fingerprint, other sampling, another judge.

A run here is the page data of html.load_run: its `name`, `path`, `run` (run.json), `_ids` (the
selection), `_verdicts` and `_running` (ids in flight: unfinished, never paired).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.report.calls import call_differences, identity
from harness.report.significance import ALPHA, mcnemar, min_detectable, paired_bootstrap
from harness.report.stats import paired_delta
from harness.results.layout import RunDir


def differences(base: dict, other: dict) -> list[str]:
    """Why two runs do not compare like with like: another dataset, another selection."""
    out = []
    fp = [(r.get("run") or {}).get("dataset_fingerprint") for r in (base, other)]
    if fp[0] and fp[1] and fp[0] != fp[1]:
        out.append(f"another dataset (dataset_fingerprint {fp[0]} vs {fp[1]})")
    a, b = set(base["_ids"]), set(other["_ids"])
    if a != b:
        out.append(f"another selection ({len(a)} vs {len(b)} instances, {len(a & b)} in common)")
    return out


def compare(base: dict, other: dict, *, force: bool = False, calls: bool = False) -> dict:
    """Per instance fixed (failed in base, passed in other) / broken / unchanged, and the paired
    delta with its 95% interval (stats.paired_delta), over the ids both runs selected and finished
    with a verdict; every other id either run selected is `not_comparable`. `compared` is False, with no
    delta, when there is nothing to pair or the runs differ (`reasons`) and force is not set; else the test,
    the noise floor used and the conclusion (`significance`). `calls`: what differs between the runs' calls,
    read from their traces (report/calls.py)."""
    reasons = differences(base, other)
    theirs = set(other["_ids"])
    common = [i for i in base["_ids"] if i in theirs]

    def judged(run: dict, iid: str) -> bool:
        return run["_verdicts"][iid][0] not in ("missing", "no_verdict", "unscored") and iid not in run["_running"]

    paired = [i for i in common if judged(base, i) and judged(other, i)]
    same_dataset = not any(r.startswith("another dataset") for r in reasons)
    out = {"base": base["name"], "other": other["name"], "same_dataset": same_dataset,
           "reasons": reasons, "forced": bool(reasons and force), "n_common": len(common), "n": len(paired),
           "n_left_out": len(common) - len(paired), "compared": False, "base_accuracy": None,
           "other_accuracy": None, "delta": None, "delta_ci95": None,
           "fixed": [], "broken": [], "unchanged_pass": [], "unchanged_fail": [],
           "not_comparable": sorted((set(base["_ids"]) | theirs) - set(paired)), "graded": False, "test": None,
           "p_value": None, "noise": None, "distinguishable": None, "conclusion": "",
           "calls": call_differences(identity(Path(base["path"])), identity(Path(other["path"])), base["run"],
                                     other["run"]) if calls and base.get("path") and other.get("path") else []}
    if (reasons and not force) or not paired:
        return out
    pairs = [(base["_verdicts"][i][1], other["_verdicts"][i][1]) for i in paired]
    d = paired_delta(pairs)
    out.update(compared=True, base_accuracy=d.base, other_accuracy=d.other, delta=d.delta, delta_ci95=list(d.ci95))
    for iid in paired:
        before, after = base["_verdicts"][iid][2], other["_verdicts"][iid][2]
        out["fixed" if after and not before else "broken" if before and not after
            else "unchanged_pass" if after else "unchanged_fail"].append(iid)
    out.update(significance(pairs, len(out["fixed"]), len(out["broken"]), d.delta, base, other))
    return out


def significance(pairs: list[tuple[float, float]], fixed: int, broken: int, delta: float, base: dict,
                 other: dict) -> dict[str, Any]:
    """The test, the noise floor used and the conclusion in words (the module docstring)."""
    graded = any(v not in (0.0, 1.0) for pair in pairs for v in pair)
    low: float | None
    high: float | None
    if graded:
        low, high = paired_bootstrap(pairs)
        test, p = f"paired bootstrap 95% interval [{low:+.1%}, {high:+.1%}]", None
        beyond = low > 0 or high < 0
    else:
        p = mcnemar(fixed, broken)
        test, beyond = f"exact McNemar test p = {p:.3g} ({fixed} fixed, {broken} broken)", p < ALPHA
        low = high = None
    noise = noise_floor([base, other], len(pairs))
    above = noise is None or abs(delta) >= noise["min_detectable"]
    said = (f"the measured noise floor of {noise['run']} (flip rate {noise['flip_rate']:.1%} over {noise['reruns']} "
            f"reruns: minimum detectable difference {noise['min_detectable']:.1%} at {len(pairs)} instances)"
            if noise else "no measured noise floor (`harness noise RUN` measures one): the test's alone")
    yes = beyond and above
    if yes or not beyond:
        conclusion = f"{'distinguishable' if yes else 'NOT distinguishable'} from noise: delta {delta:+.1%}, {test}"
    else:
        conclusion = f"NOT distinguishable from noise: delta {delta:+.1%} is below the noise floor, though {test}"
    conclusion += f"; noise floor: {said}"
    return {"graded": graded, "test": test, "p_value": p, "bootstrap_ci95": None if low is None else [low, high],
            "noise": noise, "distinguishable": yes, "conclusion": conclusion}


def noise_floor(runs: list[dict], n: int) -> dict[str, Any] | None:
    """The measured noise floor to use (DIR/noise.json of either run: the larger flip rate), at n pairs."""
    found = []
    for run in runs:
        measured = read_noise(Path(run["path"])) if run.get("path") else None
        if measured is not None:
            found.append({"run": run["name"], "flip_rate": float(measured["flip_rate"]),
                          "reruns": int(measured["reruns"]), "n": int(measured["n"])})
    if not found:
        return None
    chosen = max(found, key=lambda f: f["flip_rate"])
    return {**chosen, "min_detectable": min_detectable(chosen["flip_rate"], n)}


def read_noise(run_dir: Path) -> dict[str, Any] | None:
    """DIR/noise.json when there is a readable one."""
    try:
        data = json.loads(RunDir(run_dir).noise.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and {"flip_rate", "reruns", "n"} <= set(data) else None


def comparison_line(c: dict) -> str:
    """One line for the terminal: the delta, or why there is none."""
    head = f"{c['other']} vs {c['base']}: "
    if c["reasons"] and not c["forced"]:
        return head + "not compared: " + "; ".join(c["reasons"]) + " (--compare compares them anyway)"
    if not c["n_common"]:
        return head + "no common instances, nothing to compare"
    if not c["compared"]:
        return head + f"none of the {c['n_common']} common instances finished with a verdict in both runs"
    lo, hi = c["delta_ci95"]
    line = (head + f"{c['base_accuracy']:.1%} -> {c['other_accuracy']:.1%} over {c['n']} paired instances, "
            f"delta {c['delta']:+.1%} [{lo:+.1%}, {hi:+.1%}], fixed {len(c['fixed'])}, broken {len(c['broken'])}")
    if c["n_left_out"]:
        line += f"; {c['n_left_out']} common instances left out (unfinished or without a verdict in a run)"
    if c["forced"]:
        line += "; compared anyway: " + "; ".join(c["reasons"])
    if c.get("conclusion"):
        line += ". " + c["conclusion"]
    return line


def comparison_text(c: dict) -> list[str]:
    """`harness compare`'s lines for one comparison: the delta, the counts, the test, the noise floor, what
    differs between the runs' calls, and the conclusion in plain words."""
    lines = [comparison_line({**c, "conclusion": ""})]
    if c["compared"]:
        unchanged = len(c["unchanged_pass"]) + len(c["unchanged_fail"])
        lines.append(f"  fixed {len(c['fixed'])}, broken {len(c['broken'])}, unchanged {unchanged} "
                     f"({len(c['unchanged_pass'])} passing, {len(c['unchanged_fail'])} failing), "
                     f"not comparable {len(c['not_comparable'])}")
        for word in ("fixed", "broken"):
            if c[word]:
                lines.append(f"  {word}: {' '.join(c[word])}")
    elif c["not_comparable"]:
        lines.append(f"  not comparable {len(c['not_comparable'])}")
    lines += [f"  calls: {d}" for d in c.get("calls") or []]
    if c.get("conclusion"):
        lines.append("  " + c["conclusion"])
    return lines
