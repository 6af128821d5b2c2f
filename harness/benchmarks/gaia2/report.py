"""Gaia2's figures as ARE's own report gives them (its benchmark/report_stats.py), over a Gaia2 run's rows.

A Gaia2 run (its tasks carry a ``variant``: harness/benchmarks/gaia2/dataset.py) gets, beside the harness's headline:
- per capability and per variant: its scenarios, runs (scenario x epoch), the runs judged, passed, errored,
  missing and not judged; ``accuracy`` = passed / judged runs (ARE's success rate); ``pass_at_k`` and
  ``pass_hat_k`` over the K epochs: the share of the judged scenarios with at least one run passed, with every
  run passed (ARE's Pass@k and Pass^k); ``cost_per_scenario`` (every attempt of its epochs, the agents' and the
  judge's calls; None when the model is not priced) and ``time_per_run_s`` (the mean of its runs' durations);
- ``headline``: the mean of the capabilities' accuracies, each capability weighted equally (ARE's macro
  success rate), and with K > 1 the standard deviation of that mean over the epochs (each epoch's own).
Denominators are the harness's (harness/report/build.py): an errored or missing run is a run failed (and
counted so); a run without a verdict (ARE could not judge it) is left out of every figure and counted
(``not_judged_runs``); a scenario counts in pass@K and pass^K only when every epoch of it was judged. A
capability with nothing judged has no accuracy (None): the headline's mean leaves it out and names it.

- ``judge``: how ARE judged the runs (`judging`): the runs its LLM judge judged (``llm_runs``: the run's
  --judge-model answered its soft checks) and those its scripted checks alone judged (``hard_runs``: no judge
  model, so a message's text was never compared), and, when any was hard-judged, ``warning``: the figure is not
  comparable to ARE's leaderboard, whose runner always has an LLM judge. The terminal, the HTML report and the
  export say it (`warning`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from statistics import mean, stdev
from typing import Any

from rich.markup import escape

from harness.results.model import ResultRow

__all__ = ["applies", "figures", "group", "judging", "lines", "warning"]


def applies(tasks: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether the run is Gaia2's (its tasks carry a variant)."""
    return any("variant" in t for t in tasks.values())


def _outcome(row: ResultRow | None) -> str:
    if row is None:
        return "missing"
    if row.status == "error":
        return "errored"
    if row.correct is None:
        return "not_judged"
    return "passed" if row.correct else "failed"


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def group(ids: Sequence[str], latest: Mapping[tuple[str, int], ResultRow], epochs: int,
           costs: Mapping[str, float] | None) -> dict[str, Any]:
    outcomes = [[_outcome(latest.get((iid, e))) for e in range(1, epochs + 1)] for iid in ids]
    counts = Counter(o for runs in outcomes for o in runs)
    judged_runs = epochs * len(ids) - counts["not_judged"]
    judged = [runs for runs in outcomes if "not_judged" not in runs]
    durations = [row.duration_s for iid in ids for e in range(1, epochs + 1) if (row := latest.get((iid, e)))]
    return {"scenarios": len(ids), "runs": epochs * len(ids), "judged_runs": judged_runs,
            "passed_runs": counts["passed"], "errored_runs": counts["errored"], "missing_runs": counts["missing"],
            "not_judged_runs": counts["not_judged"], "accuracy": _rate(counts["passed"], judged_runs),
            "judged_scenarios": len(judged), "pass_at_k": _rate(sum("passed" in r for r in judged), len(judged)),
            "pass_hat_k": _rate(sum(all(o == "passed" for o in r) for r in judged), len(judged)),
            "cost_per_scenario": sum(costs.get(i, 0.0) for i in ids) / len(ids) if costs is not None else None,
            "time_per_run_s": mean(durations) if durations else None}


def _grouped(selected: Sequence[str], tasks: Mapping[str, Mapping[str, Any]], field: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for iid in selected:
        groups.setdefault(str(tasks.get(iid, {}).get(field) or "unknown"), []).append(iid)
    return dict(sorted(groups.items()))


def figures(latest: Mapping[tuple[str, int], ResultRow], selected: Sequence[str], epochs: int,
            tasks: Mapping[str, Mapping[str, Any]], costs: Mapping[str, float] | None) -> dict[str, Any]:
    """The module docstring's figures; `costs` is each id's cost (None: the model is not priced)."""
    by_capability = _grouped(selected, tasks, "capability")
    capabilities = {c: group(ids, latest, epochs, costs) for c, ids in by_capability.items()}
    rated = {c: g["accuracy"] for c, g in capabilities.items() if g["accuracy"] is not None}
    per_epoch = []  # each epoch's equal-weight mean, over the capabilities judged in it
    for e in range(1, epochs + 1):
        alone = [group(ids, {(i, 1): r for (i, n), r in latest.items() if n == e}, 1, None)["accuracy"]
                 for ids in by_capability.values()]
        if judged := [a for a in alone if a is not None]:
            per_epoch.append(mean(judged))
    headline = {"accuracy": mean(rated.values()) if rated else None, "weighting": "capabilities weighted equally",
                "capabilities": sorted(rated), "not_judged": sorted(set(capabilities) - set(rated)),
                "per_epoch": per_epoch, "std_over_epochs": stdev(per_epoch) if len(per_epoch) > 1 else None}
    variants = {v: group(ids, latest, epochs, costs) for v, ids in _grouped(selected, tasks, "variant").items()}
    return {"k": epochs, "headline": headline, "capabilities": capabilities, "variants": variants,
            "judge": judging(latest, selected)}


HARD = ("ARE's scripted checks alone (no --judge-model): message texts were not compared, so the Gaia2 figures are "
        "not comparable to ARE's leaderboard, whose runner always judges with an LLM")


def judging(latest: Mapping[tuple[str, int], ResultRow], selected: Sequence[str]) -> dict[str, Any]:
    """How ARE judged the selected ids' runs (the module docstring's ``judge``), from their verdicts."""
    chosen = set(selected)
    modes = Counter(verdict.get("judge") for (iid, _), row in latest.items()
                    if iid in chosen and (verdict := row.verdicts.get("gaia2")) and verdict.get("verdict") in
                    ("pass", "fail"))
    hard = modes["hard"]
    return {"llm_runs": modes["llm"], "hard_runs": hard,
            "warning": None if not hard else f"{hard} of {sum(modes.values())} judged Gaia2 runs were judged by {HARD}"}


def warning(found: Mapping[str, Any] | None) -> str | None:
    """What a Gaia2 run's figures must be read with (None: nothing, or no Gaia2 run)."""
    return ((found or {}).get("judge") or {}).get("warning")


def _pct(x: float | None) -> str:
    return "not judged" if x is None else f"{100 * x:.1f}%"


def _line(g: Mapping[str, Any], k: int) -> str:
    cost = "not priced" if g["cost_per_scenario"] is None else f"${g['cost_per_scenario']:.4f}"
    time = "-" if g["time_per_run_s"] is None else f"{g['time_per_run_s']:.1f}s"
    told = "".join(f", {g[key]} {words}" for key, words in (("errored_runs", "errored"), ("missing_runs", "not run"),
                                                            ("not_judged_runs", "NOT JUDGED (left out)")) if g[key])
    return (f"{g['passed_runs']}/{g['judged_runs']} runs = {_pct(g['accuracy'])}; pass@{k} {_pct(g['pass_at_k'])}, "
            f"pass^{k} {_pct(g['pass_hat_k'])} of {g['judged_scenarios']} scenarios{told}; {cost}/scenario, "
            f"{time}/run")


def lines(found: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The report table's rows (label, value) of `figures`."""
    k, head = found["k"], found["headline"]
    spread = f" (std over the {k} epochs {_pct(head['std_over_epochs'])})" if head["std_over_epochs"] is not None \
        else ""
    left = f"; no judged run, left out: {', '.join(head['not_judged'])}" if head["not_judged"] else ""
    out = [("Gaia2 (equal-weight mean)", f"{_pct(head['accuracy'])}: the mean of {len(head['capabilities'])} "
                                         f"capabilities' accuracies, each weighted equally{spread}{left}")]
    if told := warning(found):
        out.append(("[bold red]Gaia2 judge[/bold red]", f"[red]{escape(told)}[/red]"))
    out += [(f"capability {c}", _line(g, k)) for c, g in found["capabilities"].items()]
    out += [(f"variant {v}", _line(g, k)) for v, g in found["variants"].items()]
    return out
