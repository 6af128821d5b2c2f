"""Typed contract shared by every scorer: context in, ``Score`` out."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from harness.errors import ScorerError

__all__ = ["Score", "ScoreContext", "Scorer", "ScorerError", "make_score"]


class ScoreContext(BaseModel):
    """What a scorer may know about the run besides the answer itself."""

    tool_calls: list[str] = Field(default_factory=list)  # tool names, in call order
    total_tokens: int | None = None
    max_tokens: int | None = None
    steps: int | None = None
    max_steps: int | None = None
    question: str = ""
    expected_tool_calls: list[str] | None = None  # the task's own (the dataset's expected_tool_calls)
    instance_id: str = ""  # the instance scored
    metadata: dict[str, Any] = Field(default_factory=dict)  # its dataset row's other fields (Instance.metadata)
    verdicts: dict[str, dict[str, Any]] = Field(default_factory=dict)  # a tool family's judgement, by family


class Score(BaseModel):
    """One scorer's verdict. ``correct`` is None when no verdict could be reached."""

    scorer: str
    correct: bool | None
    value: float
    explanation: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class Scorer(Protocol):
    """Anything with a ``name`` and a ``score`` method of this shape. A scorer that judges the run rather than
    its answer (the environment's verdict) sets ``needs_answer = False``: it is asked without an answer too."""

    name: str

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score: ...


def make_score(
    scorer: str, correct: bool | None, explanation: str = "", **details: Any
) -> Score:
    """Build a binary Score: value 1.0 when correct, else 0.0 (also for None)."""
    return Score(
        scorer=scorer,
        correct=correct,
        value=1.0 if correct else 0.0,
        explanation=explanation,
        details=details,
    )
