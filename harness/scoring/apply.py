"""The one scoring path: `harness run` and `harness score` both call `score_row`.

Rules:
- Every scorer sees the same ScoreContext, rebuilt from what the row, run.json, tasks.json,
  questions.json and metadata.json keep (tool calls, tokens, steps, the run's limits made stricter
  by the task's own, the task's expected tool calls, the question, the instance's id and its
  dataset metadata), so a rescore reaches the run's verdicts.
- A missing answer (no final message, killed at a limit) is never correct, whatever the
  scorer: it is not even asked (GAIA's own rule would compare the string "None"); except a
  scorer that judges the run rather than its answer (`needs_answer = False`: Gaia2's, from
  the environment's verdict in `ScoreContext.verdicts`).
- A scorer that raises, or returns anything but a Score, costs only its own verdict: correct=None
  (no verdict, never a 0 counted as wrong), the explanation "scorer error: <type>: <message>" on one
  line (at most MAX_ERROR characters). The row keeps its status; the report counts each scorer's
  verdicts missing ("no verdict: N", the first one's explanation) and `harness run`/`harness score`
  exit 3 (harness/report/build.py `Report.missing_verdicts`).
- The first scorer's verdict is the row's `correct`.
- A verdict's own cost (the LLM judge's call) is in its details["usage"]; `judge_usage` adds a row's
  up, and the row's `judge_usage` keeps every scoring's (a rescore adds its own).
- An instance whose target is absent, or a known placeholder (PLACEHOLDERS: the `?` of GAIA's test
  split, whose answers are private), is unscored: no scorer is called, `correct` is None and the
  row's `unscored` says why (`unscored_reason`). The report leaves it out of every rate and counts it
  as unscored, distinct from a missing verdict (no exit 3 for it).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.scoring.base import Score, ScoreContext, Scorer, ScorerError, make_score
from harness.usage import Usage

MAX_ERROR = 500  # characters of a scorer error kept in its verdict's explanation
PLACEHOLDERS = ("?",)  # targets that stand for a private answer (GAIA's test split)


def unscored_reason(target: str | None) -> str | None:
    """Why an instance with this target is not scored, or None when it is."""
    if target is None or not target.strip():
        return "no target"
    if target.strip() in PLACEHOLDERS:
        return f"the target is a placeholder ({target.strip()!r}: the answers are private)"
    return None


def context_for(*, tool_calls: list[str], total_tokens: int, steps: int, limits, question: str,
                expected_tool_calls: list[str] | None = None, instance_id: str = "",
                metadata: dict | None = None, verdicts: dict | None = None) -> ScoreContext:
    """`limits`: the instance's effective Limits (the run's, made stricter by the task's own);
    `metadata`: the dataset row's (Instance.metadata; metadata.json of the run directory on a rescore)."""
    return ScoreContext(tool_calls=tool_calls, total_tokens=total_tokens, max_tokens=limits.max_tokens, steps=steps,
                        max_steps=limits.max_steps, question=question, expected_tool_calls=expected_tool_calls,
                        instance_id=instance_id, metadata=metadata or {}, verdicts=verdicts or {})


def score_one(scorer: Scorer, answer: str | None, target: str, context: ScoreContext) -> Score:
    if answer is None and getattr(scorer, "needs_answer", True):
        return make_score(scorer.name, False, "no answer: the agent gave no final message")
    try:
        out = scorer.score(answer, target, context=context)
        if not isinstance(out, Score):
            raise ScorerError(f"{scorer.name}.score returned {type(out).__name__}, not a Score")
        return out
    except Exception as exc:  # noqa: BLE001 - a scorer's failure never costs the agent's result
        return scorer_error(scorer.name, exc)


def scorer_error(name: str, exc: BaseException) -> Score:
    """No verdict; the explanation names the error's type and its message on one line (bounded)."""
    message = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    text = f"scorer error: {type(exc).__name__}" + (f": {message}" if message else "")
    if len(text) > MAX_ERROR:
        text = text[:MAX_ERROR - 1] + "…"
    return Score(scorer=name, correct=None, value=0.0, explanation=text)


def judge_usage(scores: dict[str, dict], verdicts: dict[str, dict] | None = None) -> Usage:
    """What a row's verdicts cost: the usage each score keeps in details["usage"] (the LLM judge's call), and
    each tool family's verdict in "judge_usage" (a judge asked from the sandbox through the host: Gaia2's).
    A rescoring passes no `verdicts`: theirs were counted when the instance ran."""
    total = Usage()
    spent = [(score.get("details") or {}).get("usage") for score in scores.values()]
    for used in spent + [verdict.get("judge_usage") for verdict in (verdicts or {}).values()]:
        if isinstance(used, dict):
            total += Usage.model_validate(used)
    return total


def score_row(answer: str | None, target: str | None, scorers: Sequence[Scorer],
              context: ScoreContext) -> tuple[dict[str, dict], bool | None]:
    """(scores by scorer name, the first scorer's verdict); nothing to score without a target (or with
    a placeholder one: `unscored_reason`)."""
    if unscored_reason(target) is not None or target is None or not scorers:
        return {}, None
    scores = {s.name: score_one(s, answer, target, context).model_dump() for s in scorers}
    return scores, scores[scorers[0].name]["correct"]
