"""A Harbor run's own report figures: for its multi-step tasks (steps.py), each step's rewards across the tasks'
latest rows (epoch 1 … K alike): how many rows ran the step, how many of those got a reward from its verifier, their
mean and how many ended the task there (no reward, or below its min_reward). report.json keeps them under
"harbor"; a run of single-step tasks has none (an empty table)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.results.model import ResultRow


def applies(tasks: Mapping[str, Mapping[str, Any]]) -> bool:
    return any(t.get("benchmark") == "harbor" for t in tasks.values())


def figures(latest: Mapping[tuple[str, int], ResultRow], selected: Sequence[str], epochs: int,
            tasks: Mapping[str, Mapping[str, Any]], costs: Mapping[str, float] | None) -> dict[str, Any]:
    steps: dict[str, dict[str, Any]] = {}
    chosen = set(selected)
    for (iid, _), row in latest.items():
        if iid not in chosen:
            continue
        for step in (row.verdicts.get("harbor") or {}).get("steps") or []:
            got = steps.setdefault(str(step.get("name")), {"ran": 0, "rewarded": 0, "rewards": [], "stopped": 0})
            got["ran"] += 1
            got["stopped"] += bool(step.get("stopped"))
            if isinstance(step.get("reward"), int | float) and "error" not in step:
                got["rewarded"] += 1
                got["rewards"].append(float(step["reward"]))
    return {"steps": {name: {"ran": g["ran"], "rewarded": g["rewarded"], "stopped": g["stopped"],
                             "mean_reward": sum(g["rewards"]) / len(g["rewards"]) if g["rewards"] else None}
                      for name, g in steps.items()}} if steps else {}


def lines(found: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each step's line of the report table."""
    return [(f"step {name}", f"mean reward {'-' if g['mean_reward'] is None else format(g['mean_reward'], '.3g')} "
                             f"over {g['rewarded']} of {g['ran']} run(s)"
                             + (f"; ended the task in {g['stopped']}" if g["stopped"] else ""))
            for name, g in (found.get("steps") or {}).items()]
