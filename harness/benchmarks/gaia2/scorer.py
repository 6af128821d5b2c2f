"""Gaia2's verdict: ARE's own judge, run in the instance's judge's sandbox once the agent's turns are over (the
gaia2 tool family, harness/benchmarks/gaia2/environment.py), matched the agent's write actions to the scenario's
oracle's.

The target is the verdict a solved scenario gets ("pass", the dataset adapter's). A scenario ARE could not
judge (its judge raised, its event loop died, no verdict came back) has no verdict here: a ScorerError, so
the row is counted as not judged, never as a wrong answer. The answer is not read: a scenario is solved by
its actions, whatever the agent's last words.
"""

from __future__ import annotations

from harness.scoring.base import Score, ScoreContext, ScorerError, make_score


class Gaia2Scorer:
    name = "gaia2"
    needs_answer = False

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score:
        verdict = context.verdicts.get("gaia2")
        if verdict is None:
            raise ScorerError("no verdict of ARE's judge: the scenario did not run to its end in the gaia2 tool family")
        if verdict.get("verdict") not in ("pass", "fail"):
            raise ScorerError(f"ARE could not judge the scenario ({verdict.get('verdict')}): "
                              f"{verdict.get('error') or _said(verdict) or 'no reason given'}")
        passed = verdict["verdict"] == "pass"
        actions = verdict.get("oracle_actions") or []
        turns, told = verdict.get("turns"), verdict.get("turns_done")
        return make_score(self.name, passed == (target == "pass"),
                          _said(verdict) or ("ARE's judge passed the run" if passed else "failed"),
                          matched=sum(1 for a in actions if a.get("matched")), oracle_actions=actions,
                          turns=turns, turns_done=_turns_done(turns, told), messages_to_user=told,
                          judge=verdict.get("judge"))


def _turns_done(turns: object, told: object) -> object:
    """The scenario's turns the agent ended: each message to the user ends one, but those it sends after the last
    turn (the driver's `turns_done` counts every message: 9 of 1 turn) end none."""
    if isinstance(turns, int) and isinstance(told, int):
        return min(turns, told)
    return told


def _said(verdict: dict) -> str:
    """ARE's rationale, "" when it gave none (a pass's rationale comes as the word "None")."""
    rationale = str(verdict.get("rationale") or "").strip()
    return "" if rationale in ("None", "null") else rationale
