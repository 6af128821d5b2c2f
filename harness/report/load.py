"""The one aggregation of a run directory: the figures `harness report DIR`'s table, the HTML
report and the viewer show, from results.store (output.jsonl) and traces/ (harness/report/build.py).

Rules (`read_run`):
* DIR/report.json is the report when it parses and is not older than output.jsonl (the run, or
  a rescore, wrote it after the last row): the pages then show report.json's own figures.
  Otherwise (a run in progress, one killed before its report, a report.json from an older
  harness) the report is built again from output.jsonl the way the run builds it (build_report):
  selected.json's ids and levels (a list: ids without levels; none: the rows' ids), run.json's
  epochs, reducers and headline scorer (its answer normalisation, for the majority reducer),
  tasks.json's labels, the traces; the wall time and leaked containers are the old report's, if
  any. `rebuilt` says which of the two it is, in words (None: report.json).
* The rows are read once, by results.store; the pages' reading (`lenient`) skips damaged lines
  and counts them (`damaged`) instead of refusing the directory, so a page of a run being
  written always opens; the terminal's refuses them with the store's error.
* `verdicts` are build.headline_verdicts (each id's headline outcome and value: what progress
  and comparisons count) and `levels` each selected id's level key by build.level_of.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.report.build import Report, build_report, headline_verdicts, level_of
from harness.results.layout import RunDir
from harness.results.model import ResultRow
from harness.results.store import latest_by_key, load, read_rows


@dataclass(frozen=True)
class RunFigures:
    root: Path
    report: Report  # the figures (report.json, or built again: `rebuilt`)
    rebuilt: str | None  # None: report.json as written; else why it was built again
    written: dict[str, Any] | None  # report.json as JSON (keys another harness version writes are kept)
    rows: list[ResultRow]  # every intact row, in file order
    run: dict[str, Any]  # run.json
    ids: list[str]  # the selection
    epochs: int
    verdicts: dict[str, tuple[str, float, bool]]  # id -> (outcome, value, passed) under the headline
    levels: dict[str, str] = field(default_factory=dict)  # id -> level key ("unknown" without one)
    selected: dict[str, int | None] = field(default_factory=dict)  # selected.json: id -> dataset level
    damaged: int = 0  # lines of output.jsonl skipped (lenient reading only)
    normalize: Callable[[str], str] | None = None  # the headline scorer's answer key (majority votes; None: GAIA's)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def read_run(run_dir: Path, *, lenient: bool = False) -> RunFigures:
    """The directory's figures (the module docstring)."""
    layout = RunDir(Path(run_dir))
    if lenient:
        loaded = load(layout.output, damaged_ok=True)
        rows, damaged = loaded.rows, len(loaded.damaged)
    else:
        rows, damaged = read_rows(layout.output), 0
    chosen = _json(layout.selected)
    selected: dict[str, int | None] = dict(chosen) if isinstance(chosen, dict) else {}
    if isinstance(chosen, list):  # an older selected.json: ids without levels
        selected = dict.fromkeys(map(str, chosen))
    ids = list(selected) or list(dict.fromkeys(r.instance_id for r in rows))
    run = _json(layout.run_json)
    run = run if isinstance(run, dict) else {}
    epochs, reducers = int(run.get("epochs") or 1), run.get("reducers") or ()
    normalize = _normalize(next(iter(run.get("scorers") or []), None))
    written = _json(layout.report)
    written = written if isinstance(written, dict) else None
    report, rebuilt = (_parsed(written) if _fresh(layout) else None), None
    if report is None:
        old = _parsed(written)
        tasks = _json(layout.tasks)
        report = build_report(rows, ids, leaked_containers=old.leaked_containers if old else 0,
                              wall_time_s=old.wall_time_s if old else None, levels=selected, epochs=epochs,
                              reducers=reducers, normalize=normalize, tasks=tasks if isinstance(tasks, dict) else None,
                              run_dir=layout.root, priced=run.get("prices") != "unset")
        why = "no readable report.json" if old is None else "output.jsonl is newer than report.json"
        rebuilt = f"built from output.jsonl ({why}: a run in progress, or one that ended before its report)"
    latest = latest_by_key(rows)
    levels = {iid: level_of(iid, selected, [latest.get((iid, e)) for e in range(1, epochs + 1)]) for iid in ids}
    return RunFigures(root=layout.root, report=report, rebuilt=rebuilt, written=written, rows=rows, run=run, ids=ids,
                      epochs=epochs, levels=levels, selected=selected, damaged=damaged, normalize=normalize,
                      verdicts=headline_verdicts(rows, ids, epochs=epochs, reducers=reducers, normalize=normalize))


def _parsed(written: dict | None) -> Report | None:
    try:
        return Report.model_validate(written) if written is not None else None
    except ValueError:
        return None


def _fresh(layout: RunDir) -> bool:
    """report.json is there and not older than output.jsonl."""
    at, rows_at = _mtime(layout.report), _mtime(layout.output)
    return at is not None and (rows_at is None or at >= rows_at)


def read_report(run_dir: Path) -> tuple[Report, str | None]:
    """The directory's report, and None when it is report.json as written, else why it was rebuilt."""
    figures = read_run(run_dir)
    return figures.report, figures.rebuilt


def _normalize(name: str | None):
    """The headline scorer's answer normalisation, for the majority reducer (None: GAIA's), when
    it is a built-in that needs nothing to be built."""
    from harness.scoring import get_scorer

    try:
        return getattr(get_scorer(str(name).partition("@")[0]), "normalize", None) if name else None
    except (ValueError, TypeError):
        return None
