"""A run directory as the exports read it: harness/report/load.py's one aggregation (`read_run`:
the rows, the selection, run.json, the report), plus the files of the run's layout
(harness/results/layout.py) the report does not need: questions.json, tasks.json and each row's trace.

`per_instance(run)` is each selected id's one answer with its epochs reduced (what a leaderboard
takes): with one epoch the latest row; with --epochs K the modal answer of the K latest rows
(harness/scoring/reducers.py `majority`, grouped by the headline scorer's normalisation, a tie to
the answer given first). Of the reducers only majority picks an answer (mean, pass@k and
at_least_n reduce verdicts), so whatever the run's first reducer, the answer submitted is the
majority's; the row returned is the epoch that first gave it. An id without any row is left out
(the caller names it as missing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.report.load import RunFigures, read_run
from harness.results.layout import RunDir
from harness.results.model import ResultRow
from harness.results.store import latest_by_key
from harness.scoring.reducers import Epoch, majority
from harness.traces import read_events


@dataclass(frozen=True)
class ExportRun:
    figures: RunFigures
    latest: dict[tuple[str, int], ResultRow]  # the latest row per selected (id, epoch)
    questions: dict[str, str]  # questions.json: id -> question
    tasks: dict[str, dict[str, Any]]  # tasks.json: id -> expectations and breakdown labels

    def trace(self, row: ResultRow) -> list[dict[str, Any]]:
        """The row's trace events ([] when it has none, or it is gone)."""
        path = self.figures.root / row.trace if row.trace else None
        return read_events(path) if path is not None and path.is_file() else []


def _json_object(path: Path) -> dict:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def open_run(run_dir: Path) -> ExportRun:
    """The run directory read once; InputError when it is none."""
    layout = RunDir(Path(run_dir))
    if not layout.output.exists() and not layout.run_json.exists():
        raise InputError(f"{run_dir} is not a run output directory (no output.jsonl or run.json)")
    figures = read_run(layout.root)
    wanted = set(figures.ids)
    latest = latest_by_key([r for r in figures.rows if r.instance_id in wanted])
    return ExportRun(figures=figures, latest=latest, questions=_json_object(layout.questions),
                     tasks=_json_object(layout.tasks))


def per_instance(run: ExportRun) -> dict[str, ResultRow]:
    """Each selected id's row whose answer stands for it (the module docstring), in selection order."""
    out: dict[str, ResultRow] = {}
    for iid in run.figures.ids:
        rows = [run.latest.get((iid, e)) for e in range(1, run.figures.epochs + 1)]
        present = [r for r in rows if r is not None]
        if not present:
            continue
        if len(rows) == 1:
            out[iid] = present[0]
            continue
        epochs = [Epoch(None, False, 0.0) if r is None or r.status == "error"
                  else Epoch(r.answer, r.correct is True, 0.0) for r in rows]
        winner = majority(epochs, run.figures.normalize).answer
        out[iid] = next((r for r in present if winner is not None and r.answer == winner), present[0])
    return out
