"""Report metrics. The denominator is every selected instance: missing or errored ones fail.

report.json is this `Report`; its keys, besides the headline ones:
    ids            outcome -> selected ids, by their latest row: passed (correct), failed (scored, not
                   correct), errored (status error), missing (no row) partition the selection;
                   limit lists those whose run hit a limit (they are also passed or failed)
    scorers        scorer name -> ScorerStats: every scorer of the rows, over every selected id (an
                   errored or missing id counts as not passed, score 0); the first is the headline
    env_outcomes   env (code/file/web) -> outcome (ok/timeout/crashed/error) -> count, summed over
                   the selected ids' latest rows (each row counts its trace's `env` events)
    env_outcomes_per_instance  the same per instance id (only ids with environment actions)
    wall_time_s    summed over the runs into the directory that ran instances (a resume with
                   nothing left to run keeps it; a rescore keeps it)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from statistics import mean, median

from pydantic import BaseModel, Field

from harness.results.model import ResultRow
from harness.results.store import latest_by_instance

Z95 = 1.959963984540054
OUTCOMES = ("passed", "failed", "errored", "limit", "missing")


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


class ScorerStats(BaseModel):
    n: int  # selected ids
    correct: int  # verdict True
    no_verdict: int = 0  # scored, but the scorer reached no verdict (correct None)
    accuracy: float  # the pass rate, correct / n
    ci95: tuple[float, float]
    mean_score: float  # mean Score.value over n (0 where not scored)


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
    ids: dict[str, list[str]] = Field(default_factory=lambda: {k: [] for k in OUTCOMES})
    scorers: dict[str, ScorerStats] = Field(default_factory=dict)
    env_outcomes: dict[str, dict[str, int]] = Field(default_factory=dict)
    env_outcomes_per_instance: dict[str, dict[str, dict[str, int]]] = Field(default_factory=dict)

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
    ids: dict[str, list[str]] = {k: [] for k in OUTCOMES}
    scorer_names: list[str] = []
    env_total: dict[str, Counter[str]] = {}
    env_per: dict[str, dict[str, dict[str, int]]] = {}
    n_correct = 0
    for iid in selected:
        row = latest.get(iid)
        if row is None:
            ids["missing"].append(iid)
        elif row.status == "error":
            ids["errored"].append(iid)
        else:
            ids["passed" if row.correct is True else "failed"].append(iid)
            if row.status == "limit":
                ids["limit"].append(iid)
        if row is not None:
            scorer_names += [name for name in row.scores if name not in scorer_names]
            if row.env_outcomes:
                env_per[iid] = row.env_outcomes
                for env, counts in row.env_outcomes.items():
                    env_total.setdefault(env, Counter()).update(counts)
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
    scorers = {}
    for name in scorer_names:
        verdicts = [latest[i].scores.get(name) for i in selected if i in latest and latest[i].status != "error"]
        verdicts = [v for v in verdicts if v is not None]
        passed = sum(1 for v in verdicts if v.get("correct") is True)
        rate, interval = _stats(passed, n)
        scorers[name] = ScorerStats(n=n, correct=passed, no_verdict=sum(1 for v in verdicts if v.get("correct") is None),
                                    accuracy=rate, ci95=interval,
                                    mean_score=sum(float(v.get("value") or 0.0) for v in verdicts) / n if n else 0.0)
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
        ids=ids,
        scorers=scorers,
        env_outcomes={env: dict(sorted(c.items())) for env, c in sorted(env_total.items())},
        env_outcomes_per_instance=env_per,
    )
