"""Events the parent appends to an ended agent's trace: divergences, then the judges' calls, then the verdict.

Both are written after the agent process ended, with t = 0 (events.py append_event). The row is
the truth: a trace that takes no more lines (a full disk) costs only these events, logged (a refused
verdict is returned: the run then starts no more instances, harness/runner/instance.py), never the
row. The verdict is the trace's last event; `harness run` appends one of source "run", each
`harness score` another of source "rescore" (the last verdict is the current one).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from harness.results.model import ResultRow
from harness.traces.events import Divergence, JudgeCall, VerdictEvent, append_event

log = logging.getLogger(__name__)


def append_divergences(trace_path: Path, divergences: Iterable[Divergence]) -> None:
    """A replayed row's divergences from its recording (models/replay.py), in order, before the verdict."""
    for event in divergences:
        try:
            append_event(trace_path, event)
        except OSError as exc:  # the row counts them all the same
            log.warning("could not append a divergence to %s: %s", trace_path, exc)
            break


def judge_calls(scores: dict[str, dict]) -> list[JudgeCall]:
    """The judges' calls a scoring made, taken out of its scores' details (a scorer that asks a model keeps its
    call there as `judge_call`, scoring/judge.py): the trace keeps them (`append_verdict`), the row the reply."""
    calls = []
    for name, score in scores.items():
        call = (score.get("details") or {}).pop("judge_call", None)
        if isinstance(call, dict):
            calls.append(JudgeCall(judge=name, messages=list(call.get("messages") or []),
                                   reply=str(call.get("reply", "")), response_model=str(call.get("response_model", "")),
                                   fingerprint=str(call.get("fingerprint", ""))))
    return calls


def append_verdict(trace_path: Path, row: ResultRow, source: str, calls: Iterable[JudgeCall] = ()) -> OSError | None:
    """The judges' `calls` (`judge_calls`), then the row's verdict as the trace's last event (run: after scoring;
    rescore: the new scores); the error the trace refused it with, else None."""
    if not trace_path.parent.exists():
        return None
    try:
        for call in calls:
            append_event(trace_path, call)
        append_event(trace_path, VerdictEvent(source=source, status=row.status, answer=row.answer,
                                              answer_source=row.answer_source, target=row.target,
                                              correct=row.correct, scores=row.scores))
    except OSError as exc:
        log.warning("could not append the verdict to %s: %s", trace_path, exc)
        return exc
    return None
