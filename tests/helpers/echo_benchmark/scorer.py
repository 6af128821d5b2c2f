"""The `echo` scorer: the answer is the word, exactly."""

from harness.scoring.base import Score, ScoreContext, make_score


class EchoScorer:
    name = "echo"

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score:
        return make_score(self.name, (answer or "").strip() == target, f"{answer!r} against {target!r}")
