"""Report metrics, and the denominator of each.

Denominators. An instance the agent failed on (its row errored, or it was never run) is a wrong
answer, as in GAIA's own scoring: it stays in every denominator and is counted beside (n_errors,
n_missing; the run exits 3). An instance whose scorer reached no verdict (it raised, returned
nonsense, the judge's reply did not parse, or the row has no target) is not judged: it is left out
of the denominator, never counted as wrong, and said beside the figure ("N not judged"; the run
exits 3, `Report.missing_verdicts`). An instance whose target is absent or a placeholder (GAIA's
test split: `?`; harness/scoring/apply.py `unscored_reason`) is unscored: the same leaving out, for a
named reason of its own (n_unscored, `unscored` beside n_no_verdict; whatever its rows' status), and
no exit 3 for it; a run of unscored instances alone has no accuracy (n_judged 0). So:
    accuracy, n_correct, ci95, stderr   over n_judged = n_selected - n_no_verdict - n_unscored (the
                   selected ids less the unscored and those without a verdict from the headline scorer)
    per_level      the same rule per level: n ids, no_verdict and unscored of them,
                   accuracy = correct / (n - no_verdict - unscored)
                   An id's level is the dataset's (selected.json, `levels`), else its first row's
                   (epoch order), else "unknown": the one rule of every page and table
                   (harness/report/live.py's progress takes it from here, `level_of`)
    scorers        each scorer over every (id, epoch): accuracy and mean_score over n - no_verdict
                   (with epochs, its ci95 over instances, an instance's epochs one cluster, as the headline's)
    epochs         an id is judged when every epoch of it has a verdict (or errored / is missing);
                   the reducers over judged ids, each epoch alone over its judged ids
    breakdowns     per field value: accuracy = correct / (n - no_verdict) (harness/report/breakdown.py)
A figure with nothing judged is None (null in report.json, "not judged" wherever it is shown), never
0.0, with n_judged (or n - no_verdict) 0 beside it.

report.json is this `Report`; its keys, besides the headline ones:
    ids            outcome -> selected ids, by their latest row: passed (correct), failed (scored, not
                   correct), no_verdict (not errored, but the headline scorer reached no verdict),
                   unscored (not errored, no target to score against), errored (status error),
                   missing (no row) partition the selection;
                   limit lists those whose run hit a limit (they are also passed, failed or
                   no_verdict). With epochs: missing when any epoch has no row, else errored when any
                   errored, else no_verdict when any epoch has no verdict, else passed/failed by the
                   headline reducer
    breakdowns     accuracy per value of each breakdown field the dataset has (question_type, subject;
                   GAIA's tool_family and steps bucket, harness/benchmarks/gaia/capabilities.py), each with its
                   Wilson ci95, over the rows (every id and epoch); retrieval: the evidence recall of search_corpus
    figures        a benchmark's own figures, by benchmark, for the benchmarks whose tasks the run has that
                   have some (`Benchmark.figures`, harness/benchmark.py: Gaia2's as ARE's report gives them)
    benchmark      the benchmark of every selected instance (tasks.json's; null: a mix), its `words` (what the
                   terminal and the HTML report call the rate and each state) and `verdict_notes`: per failed
                   or unjudged id, what the benchmark's verdict says of it (Harbor: reward, the verifier's
                   exit code and the tail of its output)
    disagreements  with both the gaia scorer and llm_judge: the instances where their verdicts differ
                   (lenient_only, strict_only, compared: harness/report/disagreement.py); else null
    epochs         with --epochs K > 1: each reducer's value, CI and passes, the accuracy of each
                   epoch alone, answer agreement between epochs, majority ties
                   (harness/scoring/reducers.py has the rules)
    scorers        scorer name -> ScorerStats: every scorer of the rows, over every selected id (an
                   errored or missing id counts as not passed, score 0; one without a verdict is
                   counted in no_verdict, its first explanation in first_error); the first is the headline
    env_outcomes   env (code/file/web) -> outcome (ok/nonzero_exit/timeout/crashed/error) -> count, summed over
                   the selected ids' latest rows (each row counts its trace's `env` events)
    env_outcomes_per_instance  the same per instance id (only ids with environment actions); an id whose
                   browser met a CAPTCHA or bot wall has env `web_wall` outcome `blocked` (Report.walls)
    replay         replay models only (else null): the selected ids' latest rows' tool results
                   checked against the recording's fingerprints (harness/models/replay.py): checked,
                   divergences (with the ids and their counts), not_checked (no fingerprint to
                   compare: an older recording) with its ids
    copied_example the selected ids whose answer is the prompts' example placeholder copied (answers.py)
    bracketed      the selected ids whose answer is wrapped in square brackets (`[247]`: answers.py bracketed)
    text_tool_calls  id -> model replies that were a tool call written as text (models/textcalls.py: a
                   server without its tool-call parser); an answer that was one has answer source text_tool_call
    cut_replies    id -> model replies cut at a token cap (finish_reason `length`: the server's cap, or the
                   section's max_tokens)
    priced         false when the agents' model gives no price_*_per_1k: `cost` is then null ("not priced"), never 0
    wall_time_s    summed over the runs into the directory that ran instances (a resume with
                   nothing left to run keeps it; a rescore keeps it)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from statistics import mean, median

from pydantic import BaseModel, Field

from harness.answers import bracketed, copies_example
from harness.benchmark import CUSTOM, Words, get, registered
from harness.report.breakdown import FIELDS, by_field, retrieval_recall
from harness.report.disagreement import disagreements
from harness.report.stats import clustered_interval, mean_interval, wilson_interval
from harness.results.model import ResultRow
from harness.results.store import latest_by_key
from harness.scoring.apply import unscored_reason
from harness.scoring.reducers import Epoch, agreement, reduce
from harness.terminal import first_line
from harness.text import scrub
from harness.traces import read_trace

OUTCOMES = ("passed", "failed", "no_verdict", "unscored", "errored", "limit", "missing")


def _percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class LevelStats(BaseModel):
    n: int  # ids (per epoch: ids of that epoch)
    correct: int
    accuracy: float | None  # correct / (n - no_verdict); None when none is judged
    ci95: tuple[float, float]
    no_verdict: int = 0  # of n, not judged: left out of accuracy
    unscored: int = 0  # of n, no target to score against: left out of accuracy


class ScorerStats(BaseModel):
    n: int  # selected ids (and epochs) but the unscored
    correct: int  # verdict True
    no_verdict: int = 0  # not errored, but the scorer reached no verdict (correct None, or no score)
    accuracy: float | None  # the pass rate over the judged, correct / (n - no_verdict); None: none judged
    ci95: tuple[float, float]
    mean_score: float | None  # mean Score.value over the judged (0 for errored and missing ids); None: none judged
    first_error: str | None = None  # the explanation of the first verdict missing (a scorer error's message)


class TimeStats(BaseModel):
    mean: float | None = None
    median: float | None = None
    p90: float | None = None


class ReducerStats(BaseModel):
    value: float | None  # mean reduced value over the judged ids (the module docstring); None: none judged
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


class CostStats(BaseModel):
    """Dollars at the models' prices (harness/usage.py), every attempt of the selected ids: the agents'
    calls, the LLM judge's (every scoring: `harness run`'s and each `harness score`'s), their total,
    and the total per level and per instance (its epochs added up)."""

    total: float = 0.0
    agents: float = 0.0
    judge: float = 0.0
    judge_calls: int = 0
    per_level: dict[str, float] = Field(default_factory=dict)
    per_instance: dict[str, float] = Field(default_factory=dict)


class ReplayStats(BaseModel):
    rows: int  # replayed rows (selected ids' latest, every epoch)
    checked: int = 0  # tool results compared with the recording's fingerprint
    divergences: int = 0  # of those, results that differ
    diverged: dict[str, int] = Field(default_factory=dict)  # instance id -> its divergences
    not_checked: int = 0  # tool results with no fingerprint to compare: not judged
    not_checked_ids: list[str] = Field(default_factory=list)


class Report(BaseModel):
    n_selected: int
    n_correct: int
    accuracy: float | None  # n_correct / n_judged (see the module docstring); None when n_judged is 0
    n_judged: int | None = None  # the headline's denominator: n_selected - n_no_verdict (None: an older report)
    n_no_verdict: int = 0  # selected ids without a verdict from the headline scorer: not judged
    n_unscored: int = 0  # selected ids with no target (absent or a placeholder): not judged either
    stderr: float | None  # None when n_judged is 0
    ci95: tuple[float, float]
    per_level: dict[str, LevelStats] = Field(default_factory=dict)
    n_errors: int = 0  # selected ids whose latest row is an error
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    first_errors: dict[str, str] = Field(default_factory=dict)  # error kind -> "ID: the first errored row's error"
    n_missing: int = 0  # selected ids with no row at all
    n_limit: dict[str, int] = Field(default_factory=dict)
    answer_sources: dict[str, int] = Field(default_factory=dict)  # solution_tag, final_message, text_tool_call
    # ids whose answer is the prompts' example placeholder copied (harness/answers.py copies_example)
    copied_example: list[str] = Field(default_factory=list)
    # ids whose answer is wrapped in square brackets, `[247]` (harness/answers.py bracketed)
    bracketed: list[str] = Field(default_factory=list)
    # id -> model replies that were a tool call written as text (models/textcalls.py): a server without
    # its tool-call parser; an answer that was one is answer source text_tool_call (no answer)
    text_tool_calls: dict[str, int] = Field(default_factory=dict)
    # id -> model replies cut at a token cap (the row's cut_replies: finish_reason "length")
    cut_replies: dict[str, int] = Field(default_factory=dict)
    tokens: dict[str, int] = Field(default_factory=lambda: {"prompt": 0, "completion": 0, "total": 0})
    # the agents' calls, every attempt of the selected ids, retried errors included; None when not priced
    cost: float | None = 0.0
    # False: the agents' model gives no price_*_per_1k, so `cost` (and the agents' part of `costs`) is no
    # figure: shown as "not priced", never $0 (run.json's prices "unset"); True: priced, or a replay model
    priced: bool = True
    costs: CostStats = Field(default_factory=CostStats)  # the agents' and the judge's, in total, per level and id
    llm_calls: int = 0
    cache_hits: int = 0  # calls --cache answered (agents' and, with --cache-judge, the judge's; models/cache.py)
    time_per_instance_s: TimeStats = Field(default_factory=TimeStats)
    wall_time_s: float | None = None
    leaked_containers: int = 0
    ids: dict[str, list[str]] = Field(default_factory=lambda: {k: list[str]() for k in OUTCOMES})
    scorers: dict[str, ScorerStats] = Field(default_factory=dict)
    env_outcomes: dict[str, dict[str, int]] = Field(default_factory=dict)
    env_outcomes_per_instance: dict[str, dict[str, dict[str, int]]] = Field(default_factory=dict)
    epochs: EpochReport | None = None  # --epochs K > 1: per-epoch accuracy, reducers, agreement
    basis: str | None = None  # what besides the rows it was computed from (runner/phases/record.py report_basis)
    breakdowns: dict[str, dict[str, dict]] = Field(default_factory=dict)  # field -> value -> n/correct/accuracy
    retrieval: dict | None = None  # evidence recall of the search tool: n, mean, by_question_type
    replay: ReplayStats | None = None  # replay models: tool results against the recording (module docstring)
    disagreements: dict | None = None  # gaia vs llm_judge where they differ (harness/report/disagreement.py)
    figures: dict[str, dict] = Field(default_factory=dict)  # a benchmark's own figures, by benchmark
    benchmark: str | None = None  # the benchmark of every selected instance; None: a mix (tasks.json's)
    words: dict[str, str] = Field(default_factory=lambda: asdict(Words()))  # what it calls things (one name a state)
    # id -> what its benchmark's verdict says of a failed or unjudged instance (Harbor: the verifier's exit code and
    # the tail of its output), from its latest row
    verdict_notes: dict[str, str] = Field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return self.leaked_containers == 0

    def walls(self) -> dict[str, int]:
        """Instance id -> responses that were a CAPTCHA or bot wall (env `web_wall`, outcome `blocked`: the
        run's web proxy recognised it, harness/web/rules.py), for the ids that met at least one."""
        return {iid: n for iid, envs in self.env_outcomes_per_instance.items()
                if (n := envs.get("web_wall", {}).get("blocked", 0))}

    def statuses(self) -> dict[str, int]:
        """Selected (id, epoch)s by their latest row's status (ok, limit, error) or missing (no row),
        zeros left out: the page's outcomes."""
        limit, units = sum(self.n_limit.values()), self.n_selected * (self.epochs.k if self.epochs else 1)
        counts = {"ok": units - self.n_errors - limit - self.n_missing, "limit": limit, "error": self.n_errors,
                  "missing": self.n_missing}
        return {k: v for k, v in counts.items() if v}

    @property
    def headline(self) -> str | None:
        """The headline scorer's name (the first), None without scores."""
        return next(iter(self.scorers), None)

    def missing_verdicts(self) -> str | None:
        """One line naming each scorer with verdicts missing, its count and first error; None when
        every verdict was reached (`harness run` and `harness score` then exit 3 otherwise)."""
        parts = [f"{name} {s.no_verdict} of {s.n}" + (f" (first: {s.first_error})" if s.first_error else "")
                 for name, s in self.scorers.items() if s.no_verdict]
        return "no verdict: " + "; ".join(parts) if parts else None


def level_of(iid: str, levels: Mapping[str, int | None], rows: Sequence[ResultRow | None]) -> str:
    """The id's level key (the module docstring): the dataset's, else its first row's (epoch order)."""
    level = levels.get(iid)
    if level is None:
        level = next((r.level for r in rows if r is not None), None)
    return "unknown" if level is None else str(level)


def _costs(spent: Sequence[ResultRow], selected: Sequence[str], levels: Mapping[str, int | None]) -> CostStats:
    """The selected ids' rows' cost (every attempt): agents, judge, total, per level and per instance."""
    per_instance: dict[str, float] = dict.fromkeys(selected, 0.0)
    per_level: dict[str, float] = {}
    for row in spent:
        cost = row.usage.cost + row.judge_usage.cost
        per_instance[row.instance_id] += cost
        key = level_of(row.instance_id, levels, [row])
        per_level[key] = per_level.get(key, 0.0) + cost
    agents, judge = sum(r.usage.cost for r in spent), sum(r.judge_usage.cost for r in spent)
    return CostStats(total=agents + judge, agents=agents, judge=judge,
                     judge_calls=sum(r.judge_usage.llm_calls for r in spent),
                     per_level=dict(sorted(per_level.items(), key=lambda kv: (kv[0] == "unknown", kv[0]))),
                     per_instance=per_instance)


def _stats(correct: int, n: int) -> tuple[float | None, tuple[float, float]]:
    return (correct / n if n else None), wilson_interval(correct, n)


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
    priced: bool = True,
) -> Report:
    """Aggregate the latest row of each selected (id, epoch); `levels` (from the dataset) places
    missing ids. With epochs > 1 the headline is the first reducer's (mean by default): accuracy is
    the mean reduced value, n_correct the instances it passes; counts of errors, limits, tokens,
    scorers and environment actions are over every (id, epoch). Ids without a verdict are left out
    of every rate and counted (the module docstring)."""
    selected = list(dict.fromkeys(selected_ids))
    wanted = set(selected)
    latest = latest_by_key([r for r in rows if r.instance_id in wanted])
    units = [(iid, e) for iid in selected for e in range(1, epochs + 1)]
    levels = levels or {}
    errors: Counter[str] = Counter()
    first_errors: dict[str, str] = {}
    limits: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    copied: dict[str, None] = {}
    in_brackets: dict[str, None] = {}
    as_text: Counter[str] = Counter()
    cut: Counter[str] = Counter()
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
            per_env = env_per.setdefault(iid, {}).setdefault(env, {})
            for outcome, count in counts.items():
                per_env[outcome] = per_env.get(outcome, 0) + count
        if row.status == "error":
            errors[row.error_kind or "unknown"] += 1
            first = scrub(f"{iid}: {first_line(row.error or 'no message')}")  # a model's text: any code point
            first_errors.setdefault(row.error_kind or "unknown", first)
        else:
            sources[row.answer_source] += 1
        if copies_example(row.answer):
            copied[iid] = None
        elif bracketed(row.answer) and not bracketed(row.target):  # an interval's brackets are its own
            in_brackets[iid] = None
        as_text[iid] += row.text_tool_calls
        cut[iid] += row.cut_replies
        if row.status == "limit":
            limits[row.limit or "unknown"] += 1

    outcome_of, judged, verdicts, epoch_report = _headline(latest, selected, epochs, reducers, normalize, tasks)
    unscored = _unscored_ids(latest, selected, epochs, tasks)
    ids: dict[str, list[str]] = {k: [] for k in OUTCOMES}
    per_level: dict[str, list[int]] = {}  # key -> [n, passed, no verdict, unscored]
    level_value: Counter[str] = Counter()  # key -> sum of the judged ids' values
    for iid in selected:
        mine = [latest.get((iid, e)) for e in range(1, epochs + 1)]
        value, passed = verdicts.get(iid, (0.0, False))  # not judged: in no sum
        outcome = outcome_of[iid]
        if outcome == "scored":
            outcome = "passed" if passed else "failed"
        ids[outcome].append(iid)
        if outcome not in ("missing", "errored") and any(r is not None and r.status == "limit" for r in mine):
            ids["limit"].append(iid)
        key = level_of(iid, levels, mine)
        bucket = per_level.setdefault(key, [0, 0, 0, 0])
        bucket[0] += 1
        bucket[1] += passed
        bucket[2] += outcome == "no_verdict"
        bucket[3] += iid in unscored
        level_value[key] += value

    n = len(selected)
    n_judged = len(judged)
    n_correct = sum(passed for _, passed in verdicts.values())
    accuracy = sum(value for value, _ in verdicts.values()) / n_judged if n_judged else None
    ci95 = epoch_report.reducers[epoch_report.primary].ci95 if epoch_report else wilson_interval(n_correct, n_judged)
    scored = [u for u in units if u[0] not in unscored]
    scorers = {name: _scorer_stats(name, [latest.get(u) for u in scored], [iid for iid, _ in scored])
               for name in scorer_names}
    spent = [r for r in rows if r.instance_id in wanted]  # every attempt costs
    durations = [r.duration_s for r in latest.values()]
    prompt = sum(r.usage.prompt_tokens for r in spent)
    completion = sum(r.usage.completion_tokens for r in spent)
    classes = {name: total for name in ("cached_prompt", "cache_write", "reasoning")  # those reported
               if (total := sum(getattr(r.usage, f"{name}_tokens") for r in spent))}
    breakdowns, retrieval = _breakdowns(latest, units, tasks or {}, run_dir)
    costs = _costs(spent, selected, levels)
    named = {(tasks or {}).get(iid, {}).get("benchmark") or CUSTOM for iid in selected}
    benchmark = get(named.pop()) if len(named) == 1 else None
    notes = {iid: note for iid in [*ids["failed"], *ids["no_verdict"]] if benchmark is not None and benchmark.explain
             and (row := _last(latest, iid, epochs)) is not None and (verdict := row.verdicts.get(benchmark.name))
             and (note := benchmark.explain(verdict))}
    return Report(
        benchmark=benchmark.name if benchmark is not None else None, verdict_notes=notes,
        words=asdict(benchmark.words if benchmark is not None else Words()),
        figures={b.name: b.figures.figures(latest, selected, epochs, tasks or {}, costs.per_instance if priced
                                           else None)
                 for b in registered() if b.figures is not None and b.figures.applies(tasks or {})},
        breakdowns=breakdowns,
        retrieval=retrieval,
        n_selected=n,
        n_correct=n_correct,
        accuracy=accuracy,
        n_judged=n_judged,
        n_no_verdict=len(ids["no_verdict"]),
        n_unscored=len(unscored),
        stderr=math.sqrt(accuracy * (1 - accuracy) / n_judged) if accuracy is not None else None,
        ci95=ci95,
        per_level={
            key: LevelStats(n=b[0], correct=b[1],
                            accuracy=level_value[key] / (b[0] - b[2] - b[3]) if b[0] > b[2] + b[3] else None,
                            ci95=wilson_interval(b[1], b[0] - b[2] - b[3]), no_verdict=b[2], unscored=b[3])
            for key, b in sorted(per_level.items(), key=lambda kv: (kv[0] == "unknown", kv[0]))
        },
        n_errors=sum(errors.values()),
        errors_by_kind=dict(errors.most_common()),
        first_errors={kind: first_errors[kind] for kind, _ in errors.most_common()},
        n_missing=sum(1 for u in units if u not in latest),
        n_limit=dict(limits.most_common()),
        answer_sources=dict(sources.most_common()),
        copied_example=list(copied),
        bracketed=list(in_brackets),
        text_tool_calls={iid: n for iid, n in as_text.items() if n},
        cut_replies={iid: n for iid, n in cut.items() if n},
        tokens={"prompt": prompt, "completion": completion, "total": prompt + completion, **classes},
        cost=sum(r.usage.cost for r in spent) if priced else None,
        priced=priced,
        costs=costs,
        llm_calls=sum(r.usage.llm_calls for r in spent),
        cache_hits=sum(r.usage.cache_hits + r.judge_usage.cache_hits for r in spent),
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
        replay=_replay_stats(latest, units),
        disagreements=disagreements([latest[u] for u in units if u in latest], epochs=epochs),
    )


def _replay_stats(latest: dict, units: list) -> ReplayStats | None:
    """The replayed rows' checks summed (None: no row was replayed)."""
    checks = [(u[0], latest[u].replay) for u in units if u in latest and latest[u].replay is not None]
    if not checks:
        return None
    stats = ReplayStats(rows=len(checks))
    for iid, check in checks:
        stats.checked += check.checked
        stats.divergences += check.diverged
        stats.not_checked += check.not_checked
        if check.diverged:
            stats.diverged[iid] = stats.diverged.get(iid, 0) + check.diverged
        if check.not_checked and iid not in stats.not_checked_ids:
            stats.not_checked_ids.append(iid)
    return stats


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


def headline_verdicts(rows: list[ResultRow], selected_ids: list[str], *, epochs: int = 1, reducers: Sequence[str] = (),
                      normalize: Callable[[str], str] | None = None) -> dict[str, tuple[str, float, bool]]:
    """Each selected id's (outcome, value, passed) under the headline, as build_report counts it:
    outcome missing / errored / no_verdict / unscored (an errored one too) / scored; value and passed
    the row's verdict or, with epochs, the first reducer's over the id's epochs ((0.0, False) when not
    judged). Comparisons pair these (harness/report/html.py)."""
    selected = list(dict.fromkeys(selected_ids))
    wanted = set(selected)
    latest = latest_by_key([r for r in rows if r.instance_id in wanted])
    outcome_of, _, verdicts, _ = _headline(latest, selected, epochs, reducers, normalize)
    unscored = _unscored_ids(latest, selected, epochs)  # errored ones too: never judged
    return {iid: ("unscored" if iid in unscored else outcome_of[iid], *verdicts.get(iid, (0.0, False)))
            for iid in selected}


def _headline(latest, selected, epochs, reducers, normalize, tasks=None):
    """(outcome per id, the judged ids, (value, passed) per judged id, the EpochReport or None)."""
    outcome_of = {iid: _outcome([latest.get((iid, e)) for e in range(1, epochs + 1)]) for iid in selected}
    unscored = _unscored_ids(latest, selected, epochs, tasks)
    judged = [iid for iid in selected if outcome_of[iid] not in ("no_verdict", "unscored") and iid not in unscored]
    if epochs > 1:
        verdicts, epoch_report = _reduce_epochs(latest, selected, judged, epochs, list(reducers) or ["mean"], normalize)
        return outcome_of, judged, verdicts, epoch_report
    return outcome_of, judged, {iid: _single(latest.get((iid, 1))) for iid in judged}, None


def _single(row: ResultRow | None) -> tuple[float, bool]:
    ok = row is not None and row.status != "error" and row.correct is True
    return (1.0 if ok else 0.0), ok


def _unscored(row: ResultRow | None) -> bool:
    """The row's instance has no target to score against: the row says so, or (a row written before
    rows said so) its target is a placeholder."""
    if row is None:
        return False
    return row.unscored is not None or (row.target is not None and unscored_reason(row.target) is not None)


def _unscored_ids(latest, selected, epochs, tasks: Mapping[str, dict] | None = None) -> set[str]:
    """The selected ids whose rows (any epoch, errored ones too) have no target, or that tasks.json says
    are unscored (`unscored_task`: an id never run has no row to say it): never judged."""
    return {iid for iid in selected if (tasks or {}).get(iid, {}).get("unscored")
            or any(_unscored(latest.get((iid, e))) for e in range(1, epochs + 1))}


def unscored_task(target: str | None) -> dict[str, str]:
    """What tasks.json keeps of an instance's target: why it is unscored, when it is."""
    reason = unscored_reason(target)
    return {"unscored": reason} if reason is not None else {}


def _unjudged(row: ResultRow | None, name: str | None = None) -> bool:
    """The row ran (not errored, not missing) but has no verdict: from scorer `name`, or the row's own."""
    if row is None or row.status == "error":
        return False
    return row.correct is None if name is None else (row.scores.get(name) or {}).get("correct") is None


def _outcome(rows: list[ResultRow | None]) -> str:
    """An id's outcome over its epochs' rows: missing, errored, no_verdict, or scored (passed/failed)."""
    if any(r is None for r in rows):
        return "missing"
    if any(r is not None and r.status == "error" for r in rows):
        return "errored"
    if any(_unscored(r) for r in rows):
        return "unscored"
    return "no_verdict" if any(_unjudged(r) for r in rows) else "scored"


def _scorer_stats(name: str, rows: list[ResultRow | None], ids: list[str]) -> ScorerStats:
    """One scorer over every unit (`ids[i]` is the instance of `rows[i]`): one without its verdict is
    left out of the rates and counted; an errored or missing one counts as not passed, score 0. The
    interval is over instances (`_clustered`): an instance's epochs are not independent draws."""
    n = len(rows)
    missing = [r for r in rows if r is not None and _unjudged(r, name)]
    verdicts = [r.scores[name] for r in rows if r is not None and r.status != "error" and not _unjudged(r, name)]
    passed = sum(1 for v in verdicts if v.get("correct") is True)
    judged = n - len(missing)
    rate, interval = _stats(passed, judged)
    if len(set(ids)) < len(ids):  # epochs: several rows per instance
        interval = _clustered(name, rows, ids)
    first = None
    if missing:
        score = missing[0].scores.get(name)
        first = (score.get("explanation") or "no explanation given") if score else "the row has no score"
    return ScorerStats(n=n, correct=passed, no_verdict=len(missing), accuracy=rate, ci95=interval,
                       mean_score=sum(float(v.get("value") or 0.0) / judged for v in verdicts) if judged else None,
                       first_error=first)


def _clustered(name: str, rows: list[ResultRow | None], ids: list[str]) -> tuple[float, float]:
    """A scorer's interval with its judged rows clustered by instance (stats.clustered_interval)."""
    passes: dict[str, list[bool]] = {}
    for iid, row in zip(ids, rows, strict=True):
        if row is None or not _unjudged(row, name):
            passes.setdefault(iid, []).append(
                row is not None and row.status != "error" and row.scores[name].get("correct") is True)
    return clustered_interval(passes)


def _epoch(row: ResultRow | None, primary: str | None) -> Epoch:
    """An epoch as the reducers see it: errored or missing is no answer, not correct, value 0."""
    if row is None or row.status == "error":
        return Epoch(None, False, 0.0)
    score = row.scores.get(primary) if primary else None
    value = float(score.get("value") or 0.0) if score else float(row.correct is True)
    return Epoch(row.answer, row.correct is True, value)


def _reduce_epochs(latest, selected, judged, epochs, reducers,
                   normalize) -> tuple[dict[str, tuple[float, bool]], EpochReport]:
    """The reducers over the judged ids; each epoch alone over the ids judged in that epoch; the
    answers' agreement over every selected id."""
    primary = next((name for r in latest.values() for name in r.scores), None)  # the first scorer
    by_id = {iid: [_epoch(latest.get((iid, e)), primary) for e in range(1, epochs + 1)] for iid in selected}
    n = len(judged)
    stats: dict[str, ReducerStats] = {}
    headline: dict[str, tuple[float, bool]] = {}
    for name in reducers:
        results = {iid: reduce(name, by_id[iid], normalize) for iid in judged}
        values = [r.value for r in results.values()]
        passed = sum(r.passed for r in results.values())
        value = sum(values) / n if n else None
        binary = all(v in (0.0, 1.0) for v in values)
        stats[name] = ReducerStats(value=value, passed=passed,
                                   ci95=wilson_interval(passed, n) if binary else mean_interval(values),
                                   ties=sorted(iid for iid, r in results.items() if r.tie))
        if not headline:
            headline = {iid: (r.value, r.passed) for iid, r in results.items()}
    per_epoch = {}
    for e in range(1, epochs + 1):
        rows = {iid: latest.get((iid, e)) for iid in selected}
        unscored = sum(_unscored(row) for row in rows.values())
        seen = [iid for iid, row in rows.items() if not _unjudged(row) and not _unscored(row)]
        ok = sum(by_id[iid][e - 1].correct for iid in seen)
        per_epoch[str(e)] = LevelStats(n=len(selected), correct=ok, accuracy=ok / len(seen) if seen else None,
                                       ci95=wilson_interval(ok, len(seen)),
                                       no_verdict=len(selected) - len(seen) - unscored, unscored=unscored)
    agreements = [agreement(eps, normalize) for eps in by_id.values()]
    every = len(selected)
    return headline, EpochReport(
        k=epochs, primary=reducers[0], reducers=stats, per_epoch=per_epoch,
        agreement=sum(a for a, _ in agreements) / every if every else 1.0,
        all_agree=sum(all_ for _, all_ in agreements) / every if every else 1.0)


def _last(latest: Mapping[tuple[str, int], ResultRow], iid: str, epochs: int) -> ResultRow | None:
    """The row of `iid`'s last epoch that has one."""
    return next((row for e in range(epochs, 0, -1) if (row := latest.get((iid, e))) is not None), None)
