"""Report metrics. The denominator is every selected instance: missing or errored ones fail.

report.json is this `Report`; its keys, besides the headline ones:
    ids            outcome -> selected ids, by their latest row: passed (correct), failed (scored, not
                   correct), errored (status error), missing (no row) partition the selection;
                   limit lists those whose run hit a limit (they are also passed or failed). With
                   epochs: missing when any epoch has no row, else errored when any errored, else
                   passed/failed by the headline reducer
    breakdowns     accuracy per value of each breakdown field the dataset has (question_type, subject),
                   over the rows (every id and epoch); retrieval: the evidence recall of search_corpus
    epochs         with --epochs K > 1: each reducer's value, CI and passes, the accuracy of each
                   epoch alone, answer agreement between epochs, majority ties
                   (harness/scoring/reducers.py has the rules)
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
from pathlib import Path
from collections.abc import Callable, Mapping, Sequence
from statistics import mean, median

from pydantic import BaseModel, Field

from harness.results.model import ResultRow
from harness.report.breakdown import FIELDS, by_field, retrieval_recall
from harness.results.store import latest_by_key
from harness.traces import read_trace
from harness.scoring.reducers import Epoch, agreement, reduce

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


class ReducerStats(BaseModel):
    value: float  # mean reduced value over the selected ids
    passed: int  # ids the reducer passes
    ci95: tuple[float, float]  # Wilson for 0/1 values, else the normal approximation of the mean
    ties: list[str] = Field(default_factory=list)  # majority: ids whose modal answer was tied


class EpochReport(BaseModel):
    k: int
    primary: str  # the reducer of the headline accuracy
    reducers: dict[str, ReducerStats]
    per_epoch: dict[str, LevelStats]  # epoch -> accuracy of that epoch alone
    agreement: float  # mean share of epoch pairs giving the same (normalised) answer
    all_agree: float  # share of ids whose epochs all gave the same answer


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
    epochs: EpochReport | None = None  # --epochs K > 1: per-epoch accuracy, reducers, agreement
    basis: str | None = None  # what besides the rows it was computed from (runner/run.py _report_basis)
    breakdowns: dict[str, dict[str, dict]] = Field(default_factory=dict)  # field -> value -> n/correct/accuracy
    retrieval: dict | None = None  # evidence recall of the search tool: n, mean, by_question_type

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
    epochs: int = 1,
    reducers: Sequence[str] = (),
    normalize: Callable[[str], str] | None = None,
    tasks: Mapping[str, dict] | None = None,
    run_dir: Path | None = None,
) -> Report:
    """Aggregate the latest row of each selected (id, epoch); `levels` (from the dataset) places
    missing ids. With epochs > 1 the headline is the first reducer's (mean by default): accuracy is
    the mean reduced value, n_correct the instances it passes; counts of errors, limits, tokens,
    scorers and environment actions are over every (id, epoch)."""
    selected = list(dict.fromkeys(selected_ids))
    wanted = set(selected)
    latest = latest_by_key([r for r in rows if r.instance_id in wanted])
    units = [(iid, e) for iid in selected for e in range(1, epochs + 1)]
    levels = levels or {}
    errors: Counter[str] = Counter()
    limits: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    scorer_names: list[str] = []
    env_total: dict[str, Counter[str]] = {}
    env_per: dict[str, dict[str, dict[str, int]]] = {}
    for iid, epoch in units:
        row = latest.get((iid, epoch))
        if row is None:
            continue
        scorer_names += [name for name in row.scores if name not in scorer_names]
        for env, counts in row.env_outcomes.items():
            env_total.setdefault(env, Counter()).update(counts)
            mine = env_per.setdefault(iid, {}).setdefault(env, {})
            for outcome, count in counts.items():
                mine[outcome] = mine.get(outcome, 0) + count
        if row.status == "error":
            errors[row.error_kind or "unknown"] += 1
        else:
            sources[row.answer_source] += 1
        if row.status == "limit":
            limits[row.limit or "unknown"] += 1

    epoch_report = None
    if epochs > 1:
        verdicts, epoch_report = _reduce_epochs(latest, selected, epochs, list(reducers) or ["mean"], normalize)
    else:
        verdicts = {iid: _single(latest.get((iid, 1))) for iid in selected}
    ids: dict[str, list[str]] = {k: [] for k in OUTCOMES}
    per_level: dict[str, list[float]] = {}  # key -> [n, passed, sum of values]
    for iid in selected:
        mine = [latest.get((iid, e)) for e in range(1, epochs + 1)]
        value, passed = verdicts[iid]
        if any(r is None for r in mine):
            ids["missing"].append(iid)
        elif any(r.status == "error" for r in mine):
            ids["errored"].append(iid)
        else:
            ids["passed" if passed else "failed"].append(iid)
            if any(r.status == "limit" for r in mine):
                ids["limit"].append(iid)
        level = levels.get(iid)
        if level is None:
            level = next((r.level for r in mine if r is not None), None)
        bucket = per_level.setdefault("unknown" if level is None else str(level), [0, 0, 0.0])
        bucket[0] += 1
        bucket[1] += passed
        bucket[2] += value

    n = len(selected)
    n_correct = sum(passed for _, passed in verdicts.values())
    accuracy = sum(value for value, _ in verdicts.values()) / n if n else 0.0
    ci95 = epoch_report.reducers[epoch_report.primary].ci95 if epoch_report else wilson_interval(n_correct, n)
    scorers = {name: _scorer_stats(name, [latest.get(u) for u in units]) for name in scorer_names}
    spent = [r for r in rows if r.instance_id in wanted]  # every attempt costs
    durations = [r.duration_s for r in latest.values()]
    prompt = sum(r.usage.prompt_tokens for r in spent)
    completion = sum(r.usage.completion_tokens for r in spent)
    breakdowns, retrieval = _breakdowns(latest, units, tasks or {}, run_dir)
    return Report(
        breakdowns=breakdowns,
        retrieval=retrieval,
        n_selected=n,
        n_correct=n_correct,
        accuracy=accuracy,
        stderr=math.sqrt(accuracy * (1 - accuracy) / n) if n else 0.0,
        ci95=ci95,
        per_level={
            key: LevelStats(n=b[0], correct=b[1], accuracy=b[2] / b[0] if b[0] else 0.0,
                            ci95=wilson_interval(b[1], b[0]))
            for key, b in sorted(per_level.items(), key=lambda kv: (kv[0] == "unknown", kv[0]))
        },
        n_errors=sum(errors.values()),
        errors_by_kind=dict(errors.most_common()),
        n_missing=sum(1 for u in units if u not in latest),
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
        epochs=epoch_report,
    )


def _breakdowns(latest: dict, units: list, tasks: Mapping[str, dict], run_dir: Path | None) -> tuple[dict, dict | None]:
    """Accuracy per breakdown field the tasks carry (rows: every (id, epoch)), and the evidence's
    retrieval recall from the traces when tasks have evidence and the run directory is known."""
    fields = [f for f in FIELDS if any(f in t for t in tasks.values())]
    if not fields and not any("evidence" in t for t in tasks.values()):
        return {}, None
    rows = [latest[u].model_dump(include={"instance_id", "epoch", "correct", "trace"}) for u in units if u in latest]
    breakdowns = {f: by_field(rows, f, tasks) for f in fields}
    measured = [r for r in rows if tasks.get(r["instance_id"], {}).get("evidence") and r.get("trace")]
    if run_dir is None or not measured:
        return breakdowns, None
    traces = [read_trace(run_dir / r["trace"]) if (run_dir / r["trace"]).exists() else [] for r in measured]
    recall = retrieval_recall(measured, traces, tasks)
    recall.pop("per_row")  # per-row recall stays in the traces; the report keeps the means
    return breakdowns, recall


def _single(row: ResultRow | None) -> tuple[float, bool]:
    ok = row is not None and row.status != "error" and row.correct is True
    return (1.0 if ok else 0.0), ok


def _scorer_stats(name: str, rows: list[ResultRow | None]) -> ScorerStats:
    """One scorer over every unit (an errored or missing one counts as not passed, score 0)."""
    n = len(rows)
    verdicts = [r.scores.get(name) for r in rows if r is not None and r.status != "error"]
    verdicts = [v for v in verdicts if v is not None]
    passed = sum(1 for v in verdicts if v.get("correct") is True)
    rate, interval = _stats(passed, n)
    return ScorerStats(n=n, correct=passed, no_verdict=sum(1 for v in verdicts if v.get("correct") is None),
                       accuracy=rate, ci95=interval,
                       mean_score=sum(float(v.get("value") or 0.0) for v in verdicts) / n if n else 0.0)


def _epoch(row: ResultRow | None, primary: str | None) -> Epoch:
    """An epoch as the reducers see it: errored or missing is no answer, not correct, value 0."""
    if row is None or row.status == "error":
        return Epoch(None, False, 0.0)
    score = row.scores.get(primary) if primary else None
    value = float(score.get("value") or 0.0) if score else float(row.correct is True)
    return Epoch(row.answer, row.correct is True, value)


def _reduce_epochs(latest, selected, epochs, reducers, normalize) -> tuple[dict[str, tuple[float, bool]], "EpochReport"]:
    primary = next((name for r in latest.values() for name in r.scores), None)  # the first scorer
    by_id = {iid: [_epoch(latest.get((iid, e)), primary) for e in range(1, epochs + 1)] for iid in selected}
    n = len(selected)
    stats, headline = {}, {}
    for name in reducers:
        results = {iid: reduce(name, eps, normalize) for iid, eps in by_id.items()}
        values = [r.value for r in results.values()]
        passed = sum(r.passed for r in results.values())
        value = sum(values) / n if n else 0.0
        binary = all(v in (0.0, 1.0) for v in values)
        stats[name] = ReducerStats(value=value, passed=passed,
                                   ci95=wilson_interval(passed, n) if binary else _mean_interval(values),
                                   ties=sorted(iid for iid, r in results.items() if r.tie))
        if not headline:
            headline = {iid: (r.value, r.passed) for iid, r in results.items()}
    per_epoch = {}
    for e in range(1, epochs + 1):
        ok = sum(by_id[iid][e - 1].correct for iid in selected)
        per_epoch[str(e)] = LevelStats(n=n, correct=ok, accuracy=ok / n if n else 0.0, ci95=wilson_interval(ok, n))
    agreements = [agreement(eps, normalize) for eps in by_id.values()]
    return headline, EpochReport(
        k=epochs, primary=reducers[0], reducers=stats, per_epoch=per_epoch,
        agreement=sum(a for a, _ in agreements) / n if n else 1.0,
        all_agree=sum(all_ for _, all_ in agreements) / n if n else 1.0)


def _mean_interval(values: list[float]) -> tuple[float, float]:
    """Normal-approximation 95% interval of a mean of values in [0, 1], clamped."""
    n = len(values)
    if n < 2:
        return (0.0, 1.0)
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return (max(0.0, m - half), min(1.0, m + half))
