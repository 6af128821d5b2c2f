"""A Harbor task's reward: its own verifier (tests/test.sh), run in the instance's sandbox once the agent's turns
are over (the harbor tool family, harness/benchmarks/harbor/environment.py), wrote it to /logs/verifier.

Graded: the score's value is the reward, clamped to [0, 1] (a score's value is a fraction: the reducers, the
intervals and the mean score read it so); the row is correct when the reward reaches the threshold (1.0, a fully
solved task, by default; `--scorer harbor@T` sets another). Harbor 0.25 takes any finite reward, unbounded: the
verdict and the score's details keep the reward as the verifier wrote it, and the explanation says when it was
clamped. reward.json's other values stay in the verdict alone (a row holds them once). A verifier that could not
run to a reward (timed out, wrote none, wrote no finite number), or no verdict at all, is a ScorerError: the row
is not judged, never wrong. A multi-step task's reward is its steps' combined (steps.py); the explanation
and the details name each step's reward ("-": none). The answer is not read: a task is solved by what the agent
left in its sandbox."""

from __future__ import annotations

import math

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
        if "reward" not in verdict and verdict.get("rewards"):
            raise ScorerError(f"the verifier wrote {len(verdict['rewards'])} rewards, none named \"reward\": no "
                              "headline, as in Harbor (the report gives each one's mean)")
        reward = verdict.get("reward")
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
            raise ScorerError(f"the task's verifier gave {str(reward)[:80]!r}, not a finite number")
        value = min(max(float(reward), 0.0), 1.0)
        clamped = "" if value == reward else f", counted as {value:g} (a score is in [0, 1])"
        steps = {step["name"]: step.get("reward") for step in verdict.get("steps") or []}
        each = "; steps: " + ", ".join(f"{name} {'-' if got is None else format(got, 'g')}"
                                       for name, got in steps.items()) if steps else ""
        return Score(scorer=self.name, correct=reward >= self.threshold, value=value,
                     explanation=f"the verifier's reward is {reward:g} ({verdict.get('source')}){clamped}{each}",
                     details={"reward": reward, "exit_code": verdict.get("exit_code"),
                              **({"steps": steps} if steps else {})})
