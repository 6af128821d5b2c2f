"""A Harbor task's reward: its own verifier (tests/test.sh), run in the instance's sandbox once the agent's turns
are over (the harbor tool family, harness/benchmarks/harbor/environment.py), wrote it to /logs/verifier.

Graded: the score's value is the reward; the row is correct when the reward reaches the threshold (1.0, a fully
solved task, by default; `--scorer harbor@T` sets another). A verifier that could not run to a reward (timed out,
wrote none, wrote no number), or no verdict at all, is a ScorerError: the row is not judged, never wrong. The
answer is not read: a task is solved by what the agent left in its sandbox."""

from __future__ import annotations

from harness.scoring.base import Score, ScoreContext, ScorerError


class HarborScorer:
    name = "harbor"
    needs_answer = False
    graded = True

    def __init__(self, threshold: float = 1.0) -> None:
        self.threshold = threshold

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score:
        verdict = context.verdicts.get("harbor")
        if verdict is None:
            raise ScorerError("no verdict of the task's verifier: the agent's turns did not end in the harbor family")
        if "error" in verdict:
            raise ScorerError(f"the task's verifier gave no reward: {verdict['error']}")
        reward = float(verdict["reward"])
        return Score(scorer=self.name, correct=reward >= self.threshold, value=reward,
                     explanation=f"the verifier's reward is {reward:g} ({verdict.get('source')})",
                     details={"reward": reward, "exit_code": verdict.get("exit_code"),
                              "rewards": verdict.get("rewards")})
