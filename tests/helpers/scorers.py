"""Plug-in scorers for the tests (`--scorer tests.helpers.scorers:NAME`)."""

from __future__ import annotations

from harness.scoring.base import Score, ScoreContext


def digits_share(answer, target, *, context: ScoreContext) -> float:
    """A graded scorer: the share of the target's characters found in the answer."""
    if not target:
        return 0.0
    return sum(ch in (answer or "") for ch in target) / len(target)


def said_six(answer, target, *, context) -> bool:
    return (answer or "").strip() == "6"


def echo_context(answer, target, *, context: ScoreContext) -> Score:
    """Passes, and keeps what the context said of the instance in its details."""
    return Score(scorer="echo_context", correct=True, value=1.0,
                 details={"instance_id": context.instance_id, "metadata": context.metadata})


def broken(answer, target, *, context):
    return "not a verdict"


class QuestionMentionsCsv:
    """A class plug-in with the built-ins' contract."""

    name = "mentions_csv"

    def score(self, answer, target, *, context: ScoreContext) -> Score:
        ok = ".csv" in context.question
        return Score(scorer=self.name, correct=ok, value=float(ok), explanation="question names a csv file")


NOT_A_SCORER = 42


def raises(answer, target, *, context):
    """A scorer with a bug: it raises, with a message of two lines."""
    raise RuntimeError("scorer bug: cannot compare\nsecond line of the message")


def two_args(answer, target):
    """The old two-argument signature, without `context`: refused when loaded."""
    return answer == target


class OldStyle:
    """A class whose score() lacks the keyword-only `context`: refused when loaded."""

    name = "old_style"

    def score(self, answer, target):
        return Score(scorer=self.name, correct=answer == target, value=1.0)


class ReturnsBool:
    """A class scorer whose score() returns a bool, not a Score: a scorer error per verdict."""

    name = "returns_bool"

    def score(self, answer, target, *, context):
        return True
