"""Report metrics. The denominator is every selected instance: missing or errored ones fail."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from statistics import mean, median

from pydantic import BaseModel, Field

from harness.results.model import ResultRow
from harness.results.store import latest_by_instance

Z95 = 1.959963984540054


def wilson_interval(correct: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval; (0, 1) when there is nothing to estimate from."""
    if n <= 0:
        return (0.0, 1.0)
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # the interval always contains p; clamp away float rounding at p = 0 or 1
    return (max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)))


def _percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class LevelStats(BaseModel):
    n: int
    correct: int
    accuracy: float
    ci95: tuple[float, float]


class TimeStats(BaseModel):
    mean: float | None = None
    median: float | None = None
    p90: float | None = None


class Report(BaseModel):
    n_selected: int
    n_correct: int
    accuracy: float
    stderr: float
    ci95: tuple[float, float]
    per_level: dict[str, LevelStats] = Field(default_factory=dict)
    n_errors: int = 0  # selected ids whose latest row is an error
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    n_missing: int = 0  # selected ids with no row at all
    n_limit: dict[str, int] = Field(default_factory=dict)
    answer_sources: dict[str, int] = Field(default_factory=dict)
    tokens: dict[str, int] = Field(default_factory=lambda: {"prompt": 0, "completion": 0, "total": 0})
    cost: float = 0.0  # every attempt of the selected ids, retried errors included
    llm_calls: int = 0
    time_per_instance_s: TimeStats = Field(default_factory=TimeStats)
    wall_time_s: float | None = None
    leaked_containers: int = 0

    @property
    def clean(self) -> bool:
        return self.leaked_containers == 0


def _stats(correct: int, n: int) -> tuple[float, tuple[float, float]]:
    return (correct / n if n else 0.0), wilson_interval(correct, n)


def build_report(
    rows: list[ResultRow],
    selected_ids: list[str],
    *,
    leaked_containers: int,
    wall_time_s: float | None = None,
    levels: Mapping[str, int | None] | None = None,
) -> Report:
    """Aggregate the latest row of each selected id; `levels` (from the dataset) places missing ids."""
    selected = list(dict.fromkeys(selected_ids))
    wanted = set(selected)
    latest = latest_by_instance([r for r in rows if r.instance_id in wanted])
    levels = levels or {}
    per_level: dict[str, list[int]] = {}  # key -> [n, correct]
    errors: Counter[str] = Counter()
    limits: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    n_correct = 0
    for iid in selected:
        row = latest.get(iid)
        level = levels.get(iid)
        if level is None and row is not None:
            level = row.level
        ok = row is not None and row.status != "error" and row.correct is True
        n_correct += ok
        bucket = per_level.setdefault("unknown" if level is None else str(level), [0, 0])
        bucket[0] += 1
        bucket[1] += ok
        if row is None:
            continue
        if row.status == "error":
            errors[row.error_kind or "unknown"] += 1
        else:
            sources[row.answer_source] += 1
        if row.status == "limit":
            limits[row.limit or "unknown"] += 1

    n = len(selected)
    accuracy, ci95 = _stats(n_correct, n)
    spent = [r for r in rows if r.instance_id in wanted]  # every attempt costs
    durations = [r.duration_s for r in latest.values()]
    prompt = sum(r.usage.prompt_tokens for r in spent)
    completion = sum(r.usage.completion_tokens for r in spent)
    return Report(
        n_selected=n,
        n_correct=n_correct,
        accuracy=accuracy,
        stderr=math.sqrt(accuracy * (1 - accuracy) / n) if n else 0.0,
        ci95=ci95,
        per_level={
            key: LevelStats(n=b[0], correct=b[1], accuracy=_stats(b[1], b[0])[0], ci95=_stats(b[1], b[0])[1])
            for key, b in sorted(per_level.items(), key=lambda kv: (kv[0] == "unknown", kv[0]))
        },
        n_errors=sum(errors.values()),
        errors_by_kind=dict(errors.most_common()),
        n_missing=sum(1 for iid in selected if iid not in latest),
        n_limit=dict(limits.most_common()),
        answer_sources=dict(sources.most_common()),
        tokens={"prompt": prompt, "completion": completion, "total": prompt + completion},
        cost=sum(r.usage.cost for r in spent),
        llm_calls=sum(r.usage.llm_calls for r in spent),
        time_per_instance_s=TimeStats(
            mean=mean(durations), median=median(durations), p90=_percentile(durations, 0.9)
        )
        if durations
        else TimeStats(),
        wall_time_s=wall_time_s,
        leaked_containers=leaked_containers,
    )
