"""Build the scorers a run asks for (the LLM judge gets its own model section and rubric)."""

from __future__ import annotations

from harness.errors import InputError
from harness.models.completion import completer
from harness.models.config import ModelSection, model_section
from harness.scoring import get_scorer


def judge_section(config: dict, judge_model: str | None) -> ModelSection:
    """The LLM judge's model section: --judge-model, else [scorer.llm_judge] model."""
    judge = judge_model or config.get("scorer", {}).get("llm_judge", {}).get("model")
    if not judge:
        raise InputError("--scorer llm_judge needs --judge-model NAME or [scorer.llm_judge] model = NAME")
    return model_section(config, judge)


def build_scorers(names: list[str], config: dict, judge_model: str | None = None) -> list:
    scorers = []
    for spec in names:
        name, _, arg = spec.partition(":")  # e.g. tool_calls:run_python,visit_url
        kwargs: dict = {}
        if name == "tool_calls":
            kwargs = {"expected": [x for x in arg.split(",") if x]}
            if not kwargs["expected"]:
                raise InputError("--scorer tool_calls:NAME[,NAME...] needs the expected tool names")
        if name == "llm_judge":
            settings = config.get("scorer", {}).get("llm_judge", {})
            kwargs = {"complete": completer(judge_section(config, judge_model))}
            if settings.get("rubric"):
                kwargs["rubric"] = settings["rubric"]
        try:
            scorers.append(get_scorer(name, **kwargs))
        except (ValueError, TypeError) as exc:
            raise InputError(f"--scorer {name}: {exc}") from None
    if not scorers:
        raise InputError("--scorer: at least one scorer is needed")
    names = [s.name for s in scorers]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # a row keeps one verdict per scorer name: a second one would overwrite the first
        raise InputError(f"--scorer {', '.join(twice)} given more than once (a row keeps one verdict per scorer)")
    return scorers
