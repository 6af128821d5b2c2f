"""Look scorers up by name: the generic ones here, and each benchmark's own (`Benchmark.scorers`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.benchmark import scorer_factories

from .base import Scorer
from .gaia import GaiaScorer
from .judge import LLMJudgeScorer
from .scorers import BudgetScorer, ExactMatchScorer, ExpectedToolCallScorer

__all__ = ["CHECKS", "GENERIC", "get_scorer", "scorers"]

GENERIC: dict[str, Callable[..., Scorer]] = {
    "gaia": GaiaScorer,
    "exact": ExactMatchScorer,
    "tool_calls": ExpectedToolCallScorer,
    "budget": BudgetScorer,
    "llm_judge": LLMJudgeScorer,
}
CHECKS = ("tool_calls", "budget")  # they check how a run went, not its answer: any benchmark's run


def scorers() -> dict[str, Callable[..., Scorer]]:
    """Every scorer by name: the generic ones and every benchmark's."""
    return {**GENERIC, **scorer_factories()}


def get_scorer(name: str, **kwargs: Any) -> Scorer:
    """Build the scorer registered as ``name`` with ``kwargs`` (e.g. ``complete=`` for the judge)."""
    known = scorers()
    try:
        factory = known[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(sorted(known))}") from None
    if name == "llm_judge" and "complete" not in kwargs:
        raise TypeError("get_scorer('llm_judge') needs complete=<callable taking a prompt, returning text>")
    return factory(**kwargs)
