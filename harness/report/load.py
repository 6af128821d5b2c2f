"""The report of a run directory, for `harness report DIR`'s table (the table a run prints).

Rules: DIR/report.json is the report when it parses and is not older than output.jsonl (the
run, or a rescore, wrote it after the last row). Otherwise (a run in progress, one killed before
its report, a report.json from an older harness) the report is built again from output.jsonl
the way the run builds it: selected.json's ids and levels (else the rows' ids), run.json's epochs
and reducers, tasks.json's labels; the wall time and leaked containers are the old report's, if
any. The second value says which of the two it is, in words for the terminal (None: report.json).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.report.build import Report, build_report
from harness.results.layout import RunDir
from harness.results.store import read_rows


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def read_report(run_dir: Path) -> tuple[Report, str | None]:
    """The directory's report, and None when it is report.json as written, else why it was rebuilt."""
    layout = RunDir(Path(run_dir))
    written, rows_at = _mtime(layout.report), _mtime(layout.output)
    old = None
    if written is not None:
        try:
            old = Report.model_validate_json(layout.report.read_bytes())
        except (OSError, ValueError):
            old = None
        if old is not None and (rows_at is None or written >= rows_at):
            return old, None
    rows = read_rows(layout.output)
    levels = _json(layout.selected)
    selected = list(levels) if isinstance(levels, dict) else list(dict.fromkeys(r.instance_id for r in rows))
    run = _json(layout.run_json) or {}
    tasks = _json(layout.tasks)
    scorer = next(iter(run.get("scorers") or []), None)
    report = build_report(rows, selected, leaked_containers=old.leaked_containers if old else 0,
                          wall_time_s=old.wall_time_s if old else None,
                          levels=levels if isinstance(levels, dict) else None,
                          epochs=int(run.get("epochs") or 1), reducers=run.get("reducers") or (),
                          normalize=_normalize(scorer), tasks=tasks if isinstance(tasks, dict) else None,
                          run_dir=layout.root)
    why = "no readable report.json" if old is None else "output.jsonl is newer than report.json"
    return report, f"built from output.jsonl ({why}: a run in progress, or one that ended before its report)"


def _normalize(name: str | None):
    """The headline scorer's answer normalisation, for the majority reducer (None: GAIA's), when
    it is a built-in that needs nothing to be built."""
    from harness.scoring import get_scorer

    try:
        return getattr(get_scorer(str(name).partition("@")[0]), "normalize", None) if name else None
    except (ValueError, TypeError):
        return None
