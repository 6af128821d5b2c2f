"""Build the scorers a run asks for (the LLM judge gets its own model section and rubric), and choose them when
--scorer is not given: the dataset's benchmark's own (`judging`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from harness.benchmark import Benchmark, get, registered
from harness.config import Scoring
from harness.errors import InputError
from harness.models.config import check_section
from harness.scoring import get_scorer, scorers
from harness.scoring.plugin import load_scorer
from harness.scoring.registry import CHECKS


def _with_threshold(scorer, threshold: float | None, given: str):
    if threshold is None:
        return scorer
    if not getattr(scorer, "graded", False):
        raise InputError(f"--scorer {given}: {scorer.name} gives pass/fail verdicts; a threshold applies to graded "
                         "scorers (llm_judge, function scorers)")
    scorer.threshold = threshold
    return scorer


def _threshold(spec: str) -> tuple[str, float | None]:
    """`NAME@T` -> (NAME, T): the pass threshold of a graded scorer."""
    if "@" not in spec:
        return spec, None
    name, _, text = spec.rpartition("@")
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"--scorer {spec}: the threshold after '@' must be a number in [0, 1]") from None
    if not 0 <= value <= 1:
        raise InputError(f"--scorer {spec}: the threshold must be in [0, 1]")
    return name, value


def build_scorers(scoring: Scoring, judge_cache: Path | None = None) -> list:
    """The scorers `--scorer` names: a built-in (`NAME` or `NAME:ARG`) or a plug-in
    (`package.module:attr`, harness/scoring/plugin.py), each optionally `@THRESHOLD` when graded;
    the LLM judge calls `scoring.judge` with `scoring.rubric` (harness/config.py Scoring), through the
    response cache in `judge_cache` when given (--cache DIR --cache-judge, models/cache.py)."""
    found, known = [], scorers()
    for given in scoring.names:
        spec, threshold = _threshold(given)
        name, _, arg = spec.partition(":")  # e.g. tool_calls:run_python,visit_url
        if name not in known and arg:
            found.append(_with_threshold(load_scorer(spec), threshold, given))
            continue
        kwargs: dict = {}
        if name == "tool_calls":  # without names: each task's expected_tool_calls
            kwargs = {"expected": [x for x in arg.split(",") if x]}
        if name == "llm_judge" and scoring.judge is not None:
            from harness.models.completion import completer  # the model clients: only a run with a judge

            kwargs = {"complete": completer(check_section(scoring.judge), judge_cache)}
            if scoring.rubric:
                kwargs["rubric"] = scoring.rubric
        try:
            found.append(_with_threshold(get_scorer(name, **kwargs), threshold, given))
        except (ValueError, TypeError) as exc:
            raise InputError(f"--scorer {name}: {exc}") from None
    names = [s.name for s in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # a row keeps one verdict per scorer name: a second one would overwrite the first
        raise InputError(f"--scorer {', '.join(twice)} given more than once (a row keeps one verdict per scorer)")
    return found


def _base(spec: str) -> str:
    """The scorer's name in a --scorer spec (`NAME`, `NAME:ARG`, `NAME@T`)."""
    return spec.partition("@")[0].partition(":")[0]


def can_judge(benchmark: Benchmark, spec: str, known: Iterable[str] | None = None) -> bool:
    """Whether the scorer `spec` can judge `benchmark`'s instances: a check of how the run went (CHECKS) or a plug-in
    always; else one the benchmark names (`Benchmark.judges`), or, of a benchmark that names none, any scorer but
    another benchmark's own."""
    name = _base(spec)
    if name in CHECKS or name not in (known if known is not None else scorers()):
        return True
    if benchmark.judges is not None:
        return name in benchmark.judges
    owner = next((b.name for b in registered() if name in b.scorers), None)
    return owner in (None, benchmark.name)


def judging(scoring: Scoring, benchmarks: Iterable[str]) -> Scoring:
    """The scoring of a dataset whose instances are of `benchmarks` (names): without --scorer, their default scorers
    (InputError when they differ: a mixed dataset's verdicts must be clear); each scorer able to judge each of them
    (InputError naming the benchmark and the scorers that can)."""
    found = [get(name) for name in sorted(set(benchmarks))]
    if not scoring.given:
        defaults = {b.default_scorers for b in found}
        if len(defaults) > 1:
            mixed = "; ".join(f"{b.name}: {', '.join(b.default_scorers)}" for b in found)
            raise InputError(f"the dataset mixes benchmarks judged by different scorers ({mixed}): name the scorers "
                             "with --scorer, or run each benchmark's instances apart")
        if defaults:
            scoring = scoring.model_copy(update={"names": next(iter(defaults))})
    known = scorers()
    for benchmark in found:
        refused = [name for name in scoring.names if not can_judge(benchmark, name, known)]
        if refused:
            able = [name for name in sorted(known) if can_judge(benchmark, name, known)]
            raise InputError(f"--scorer {', '.join(refused)} cannot judge {benchmark.title} ({benchmark.name}) "
                             f"instances; the scorers that can: {', '.join(able)}")
    return scoring
