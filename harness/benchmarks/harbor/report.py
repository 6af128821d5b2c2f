"""Harbor's figure of a run whose verifiers wrote several rewards, as Harbor 0.25 reports a job (its `mean` metric,
harbor/metrics/base.py and mean.py): the mean of each reward.json key over the runs (instance x epoch), a run without
the key, or without a reward at all (errored, missing, no verdict), counted as 0. Harbor gives this per key when
its trials' rewards have more than one key between them, else one `mean`; the report shows it in the first case
alone (in the second, the harness's own mean score says it: harness/benchmarks/harbor/scorer.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.results.model import ResultRow

NAME = "harbor"


def applies(tasks: Mapping[str, Mapping[str, Any]]) -> bool:
    return any(t.get("benchmark") == NAME for t in tasks.values())


def _rewards(row: ResultRow | None) -> dict[str, float] | None:
    verdict = row.verdicts.get(NAME) if row is not None else None
    if not verdict or "error" in verdict:
        return None
    if verdict.get("rewards"):
        return dict(verdict["rewards"])
    return {"reward": verdict["reward"]} if "reward" in verdict else None


def figures(latest: Mapping[tuple[str, int], ResultRow], selected: Sequence[str], epochs: int, *_: Any) -> dict:
    runs = [_rewards(latest.get((iid, epoch))) for iid in selected for epoch in range(1, epochs + 1)]
    keys = sorted({key for found in runs if found for key in found})
    if len(keys) <= 1 or not runs:
        return {}
    return {"reward_means": {key: sum((found or {}).get(key, 0) for found in runs) / len(runs) for key in keys},
            "runs": len(runs)}


def lines(found: dict[str, Any]) -> list[tuple[str, str]]:
    if not found.get("reward_means"):
        return []
    means = ", ".join(f"{key} {value:.3f}" for key, value in found["reward_means"].items())
    return [("reward means (Harbor's)", f"{means} over {found['runs']} run(s)")]
