"""`harness export DIR --format gaia`: the GAIA leaderboard's submission, JSON Lines.

One line per selected task id that has a row (its epochs reduced: export/source.py
`per_instance`), in selection order, each exactly ``{"task_id": str, "model_answer": str,
"reasoning_trace": str}``: the answer as the row holds it (an instance without one, an errored
row, gets "" and a warning naming it), and the trace's conversation as text, at most
REASONING_LIMIT characters (export/transcript.py). The leaderboard scores a task missing from the
file as wrong, so `validate` refuses a file whose ids are not the selection's exactly: a duplicate
or an unknown id always, a selected id left out (never run) unless `allow_missing`, each named;
and any line not of the form above.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from harness.errors import InputError
from harness.export import coverage, transcript
from harness.export.source import ExportRun, per_instance
from harness.terminal import listed

REASONING_LIMIT = 20_000  # characters of a line's reasoning_trace
KEYS = ("task_id", "model_answer", "reasoning_trace")


def submission(run: ExportRun) -> tuple[list[dict[str, str]], list[str]]:
    """(the lines, the warnings): the module docstring."""
    lines, unanswered = [], []
    for iid, row in per_instance(run).items():
        answer = row.answer if isinstance(row.answer, str) else ""
        if not answer:
            unanswered.append(iid)
        trace = transcript.as_text(transcript.messages(run.trace(row)), REASONING_LIMIT)
        lines.append({"task_id": iid, "model_answer": answer, "reasoning_trace": trace})
    warnings = [f"warning: {len(unanswered)} task(s) without an answer, submitted as \"\": {listed(unanswered)}"
                ] if unanswered else []
    return lines, warnings


def validate(lines: Sequence[Any], expected: Sequence[str]) -> tuple[list[str], list[str]]:
    """(problems that always refuse the file, the expected ids missing from it)."""
    problems = []
    for number, line in enumerate(lines, 1):
        if not isinstance(line, dict) or set(line) - set(KEYS) or {"task_id", "model_answer"} - set(line):
            problems.append(f"line {number}: not an object of task_id, model_answer and an optional reasoning_trace")
        elif not all(isinstance(line[k], str) for k in line) or not line["task_id"]:
            problems.append(f"line {number}: task_id must be a non-empty string, model_answer and "
                            "reasoning_trace strings")
    ids = [line.get("task_id") for line in lines if isinstance(line, dict)]
    if duplicates := [i for i, n in Counter(ids).items() if n > 1]:
        problems.append(f"duplicate task_id: {listed([str(i) for i in duplicates])}")
    wanted = set(expected)
    if unknown := [str(i) for i in ids if i not in wanted]:
        problems.append(f"task_id not in the run's selection: {listed(unknown)}")
    present = set(ids)
    return problems, [i for i in expected if i not in present]


def render(run: ExportRun, *, allow_missing: bool, allow_partial: bool = False) -> tuple[str, list[str]]:
    """The file's text and the warnings; InputError naming the ids when `validate` refuses it, and
    naming the levels and counts left out when the run covers part of its split (coverage.gap)."""
    lines, warnings = submission(run)
    problems, missing = validate(lines, run.figures.ids)
    if problems:
        raise InputError("the GAIA submission is not valid: " + "; ".join(problems))
    if missing and not allow_missing:
        raise InputError(f"{len(missing)} selected task(s) have no row (never run), and the leaderboard would score "
                         f"them wrong: {listed(missing)}; run them (resume the run), or pass --allow-missing")
    if missing:
        warnings.append(f"warning: {len(missing)} selected task(s) without a row left out (scored wrong by the "
                        f"leaderboard): {listed(missing)}")
    if (partial := coverage.gap(run.figures.run, run.figures.ids)) is not None:
        if not allow_partial:
            raise InputError(f"a partial leaderboard file: {partial}; run the whole split, or pass --allow-partial "
                             "to write it anyway")
        warnings.append(f"warning: a partial leaderboard file: {partial}")
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), warnings
