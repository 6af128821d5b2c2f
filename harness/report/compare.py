"""Comparing runs: each run's instance reduced to one verdict by its headline (build.py
headline_verdicts: one row's verdict, or with epochs the first reducer's value, as read by
load.read_run), paired by id over the ids both runs selected that both finished with a verdict
(the others are counted, not paired: `n_left_out`). The delta's interval is stats.paired_delta's.
Runs of another dataset (run.json's dataset_fingerprint) or another selection (selected.json's
ids) are not compared unless forced: the comparison says why, with no delta. Without a common
instance there is no delta either.

A run here is the page data of html.load_run: its `name`, `run` (run.json), `_ids` (the
selection), `_verdicts` and `_running` (ids in flight: unfinished, never paired).
"""

from __future__ import annotations

from harness.report.stats import paired_delta


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


def compare(base: dict, other: dict, *, force: bool = False) -> dict:
    """Per instance fixed (failed in base, passed in other) / broken / unchanged, and the paired
    delta with its 95% interval (stats.paired_delta), over the ids both runs selected and finished
    with a verdict. `compared` is False, with no delta, when there is nothing to pair or the runs
    differ (`reasons`) and force is not set."""
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
           "fixed": [], "broken": [], "unchanged_pass": [], "unchanged_fail": []}
    if (reasons and not force) or not paired:
        return out
    d = paired_delta([(base["_verdicts"][i][1], other["_verdicts"][i][1]) for i in paired])
    out.update(compared=True, base_accuracy=d.base, other_accuracy=d.other, delta=d.delta, delta_ci95=list(d.ci95))
    for iid in paired:
        before, after = base["_verdicts"][iid][2], other["_verdicts"][iid][2]
        out["fixed" if after and not before else "broken" if before and not after
            else "unchanged_pass" if after else "unchanged_fail"].append(iid)
    return out


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
    return line
