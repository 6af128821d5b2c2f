"""Look scorers up by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Scorer
from .gaia import GaiaScorer
from .gaia2 import Gaia2Scorer
from .harbor import HarborScorer
from .judge import LLMJudgeScorer
from .math import MathScorer
from .multihoprag import MultiHopRagScorer
from .scorers import BudgetScorer, ExactMatchScorer, ExpectedToolCallScorer

__all__ = ["SCORERS", "get_scorer"]

SCORERS: dict[str, Callable[..., Scorer]] = {
    "gaia": GaiaScorer,
    "gaia2": Gaia2Scorer,
    "harbor": HarborScorer,
    "exact": ExactMatchScorer,
    "tool_calls": ExpectedToolCallScorer,
    "budget": BudgetScorer,
    "llm_judge": LLMJudgeScorer,
    "math": MathScorer,
    "multihoprag": MultiHopRagScorer,
}


def get_scorer(name: str, **kwargs: Any) -> Scorer:
    """Build the scorer registered as ``name`` with ``kwargs`` (e.g. ``complete=`` for the judge)."""
    try:
        factory = SCORERS[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(sorted(SCORERS))}") from None
    if name == "llm_judge" and "complete" not in kwargs:
        raise TypeError("get_scorer('llm_judge') needs complete=<callable taking a prompt, returning text>")
    return factory(**kwargs)
