"""Build the scorers a run asks for (the LLM judge gets its own model section and rubric)."""

from __future__ import annotations

from pathlib import Path

from harness.config import Scoring
from harness.errors import InputError
from harness.models.config import check_section
from harness.scoring import get_scorer, scorers
from harness.scoring.plugin import load_scorer


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
