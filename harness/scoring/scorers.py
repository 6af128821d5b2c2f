"""Simple deterministic scorers: exact match, expected tool calls, budget."""

from __future__ import annotations

from collections.abc import Iterable

from .base import Score, ScoreContext, make_score

__all__ = ["BudgetScorer", "ExactMatchScorer", "ExpectedToolCallScorer"]


class ExactMatchScorer:
    """Equality after stripping surrounding whitespace, optionally ignoring case."""

    name = "exact"

    def __init__(self, *, ignore_case: bool = False) -> None:
        self.ignore_case = ignore_case

    def _norm(self, text: str) -> str:
        text = text.strip()
        return text.casefold() if self.ignore_case else text

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score:
        if answer is None:
            return make_score(self.name, False, "no answer")
        ok = self._norm(answer) == self._norm(target)
        return make_score(self.name, ok, "exact match" if ok else "answer differs from target")


class ExpectedToolCallScorer:
    """Correct iff every expected tool name appears among the tools the agent called.

    The expected names are the scorer's own (`--scorer tool_calls:a,b`), else the task's
    (`expected_tool_calls` in the dataset); with neither there is no verdict (None)."""

    name = "tool_calls"

    def __init__(self, expected: Iterable[str] = ()) -> None:
        self.expected: list[str] = list(dict.fromkeys(expected))

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score:
        expected = self.expected or list(dict.fromkeys(context.expected_tool_calls or []))
        if not self.expected and context.expected_tool_calls is None:
            return make_score(self.name, None, "no expected tool calls: neither --scorer tool_calls:NAMES nor "
                                               "the task's expected_tool_calls")
        called = set(context.tool_calls)
        missing = [tool for tool in expected if tool not in called]
        why = f"missing tool calls: {', '.join(missing)}" if missing else "all expected tools called"
        return make_score(
            self.name, not missing, why, expected=expected, called=context.tool_calls, missing=missing
        )


class BudgetScorer:
    """Correct iff tokens and steps stay within their limits, for each limit known.

    Limits come from the context; constructor values are used where the context has
    none. A check is skipped (and reported in ``details['unchecked']``) when either
    the usage or the limit is unknown; with nothing to check the run passes.
    """

    name = "budget"

    def __init__(self, *, max_tokens: int | None = None, max_steps: int | None = None) -> None:
        self.max_tokens = max_tokens
        self.max_steps = max_steps

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score:
        token_limit = context.max_tokens if context.max_tokens is not None else self.max_tokens
        step_limit = context.max_steps if context.max_steps is not None else self.max_steps
        checks = {"tokens": (context.total_tokens, token_limit), "steps": (context.steps, step_limit)}
        over: list[str] = []
        unchecked: list[str] = []
        for label, (used, limit) in checks.items():
            if used is None or limit is None:
                unchecked.append(label)
            elif used > limit:
                over.append(f"{label} {used} > {limit}")
        why = "over budget: " + "; ".join(over) if over else "within budget"
        if len(unchecked) == len(checks):
            why = "no budget limits to check"
        return make_score(self.name, not over, why, over=over, unchecked=unchecked)
