"""`harness export RUN_DIR --format FORMAT --out FILE`: a run in the formats other tools read.

One module per format, each `render(run) -> (text, warnings)` over export/source.py's reading of
the run directory (harness/report/load.py's aggregation): `gaia` (the leaderboard's submission,
export/gaia.py), `inspect` (an Inspect AI eval log, export/inspect_log.py), `jsonl` (the rows
flattened, export/jsonl.py). The file is written atomically (harness/fsutil.py) and only when
its format's checks pass (InputError otherwise: nothing is written). `gaia2` writes a folder, ARE's
leaderboard's (export/gaia2.py `write`).
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import InputError
from harness.export import gaia, gaia2, inspect_log, jsonl
from harness.export.source import open_run
from harness.fsutil import write_atomic
from harness.results.layout import RunDir

FORMATS = ("gaia", "gaia2", "inspect", "jsonl")


def export(run_dir: Path, fmt: str, out: Path, *, allow_missing: bool = False,
           allow_partial: bool = False) -> list[str]:
    """Write `out` in format `fmt`; returns the warnings. InputError for a bad format, directory or file."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if fmt == "inspect" and out.suffix != ".json":
        raise InputError(f"--out {out}: an Inspect log written here must end in .json "
                         "(Inspect reads a log by its suffix)")
    for flag, given in (("--allow-missing", allow_missing), ("--allow-partial", allow_partial)):
        if given and fmt != "gaia":
            raise InputError(f"{flag} applies to --format gaia only")
    if (own := _runs_own(Path(run_dir), out)) is not None:
        raise InputError(f"--out {out}: that is the run's own {own}; name a file of the export's own")
    run = open_run(run_dir)
    if fmt == "gaia2":
        return gaia2.write(run, out)
    if fmt == "gaia":
        text, warnings = gaia.render(run, allow_missing=allow_missing, allow_partial=allow_partial)
    else:
        text, warnings = (inspect_log if fmt == "inspect" else jsonl).render(run)
    if not out.parent.is_dir():
        raise InputError(f"--out {out}: the folder {out.parent} does not exist")
    write_atomic(out, text)
    return warnings


def _runs_own(run_dir: Path, out: Path) -> str | None:
    """What of the run's own files (its layout, its folders, the summary.csv beside it) `out` is, if any."""
    layout = RunDir(run_dir.resolve())
    target = out.resolve()
    files = (layout.output, layout.run_json, layout.run_json_prev, layout.selected, layout.questions,
             layout.metadata, layout.tasks, layout.report, layout.lock, layout.rescue, layout.set_aside,
             layout.root / "report.html", layout.root.parent / "summary.csv")
    if target in files:
        return target.name
    folders = (layout.scratch, layout.traces, layout.root / "web")
    return next((f"{folder.name}/ folder" for folder in folders if target.is_relative_to(folder)), None)
