"""`harness export RUN_DIR --format FORMAT --out FILE`: a run in the formats other tools read.

One module per format, each `render(run) -> (text, warnings)` over export/source.py's reading of
the run directory (harness/report/load.py's aggregation): `inspect` (an Inspect AI eval log,
export/inspect_log.py), `jsonl` (the rows flattened, export/jsonl.py); and each benchmark's own (a
leaderboard's submission: `Benchmark.exports`, harness/benchmark.py). The file is written atomically
(harness/fsutil.py) and only when its format's checks pass (InputError otherwise: nothing is written).
`atif` (export/atif.py, one ATIF trajectory per trial) and a benchmark's folder formats write a folder: `--out`
names one that does not exist yet or is empty; the files are written into a temporary folder beside it, renamed
to `--out` when all are written (`_write_folder`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.benchmark import exports
from harness.errors import InputError
from harness.export import atif, inspect_log, jsonl
from harness.export.source import open_run
from harness.fsutil import write_atomic
from harness.results.layout import RunDir

GENERIC = ("inspect", "jsonl", "atif")
FOLDERS = ("atif",)  # the generic formats that write a folder


def formats() -> list[str]:
    """Every format: the benchmarks' own, then the generic ones."""
    return [*sorted(exports()), *GENERIC]


def export(run_dir: Path, fmt: str, out: Path, *, allow_missing: bool = False, allow_partial: bool = False,
           allow_hard_judge: bool = False, allow_few_epochs: bool = False) -> list[str]:
    """Write `out` in format `fmt`; returns the warnings. InputError for a bad format, directory or file."""
    declared = exports().get(fmt)
    own = declared[1] if declared is not None else None  # a benchmark's format
    if own is None and fmt not in GENERIC:
        raise InputError(f"--format {fmt!r}: expected one of {', '.join(formats())}")
    if fmt == "inspect" and out.suffix != ".json":
        raise InputError(f"--out {out}: an Inspect log written here must end in .json "
                         "(Inspect reads a log by its suffix)")
    options = {"allow_missing": allow_missing, "allow_partial": allow_partial, "allow_hard_judge": allow_hard_judge,
               "allow_few_epochs": allow_few_epochs}
    takes = own.options if own is not None else ()
    for option, given in options.items():
        if given and option not in takes:
            users = [name for name, (_, export) in exports().items() if option in export.options]
            raise InputError(f"--{option.replace('_', '-')} applies to --format {' or '.join(users) or 'none'} only")
    if (runs := _runs_own(Path(run_dir), out)) is not None:
        raise InputError(f"--out {out}: that is the run's own {runs}; name a file of the export's own")
    if fmt in FOLDERS or (own is not None and own.folder):
        _check_folder(out, fmt)
    run = open_run(run_dir)
    if fmt == "atif":
        files, warnings = atif.render(run)
        _write_folder(out, lambda folder: _write_json(folder, files))
        return warnings
    if own is not None:
        made, warnings = own.render(run, **{k: v for k, v in options.items() if k in takes})
        if own.folder:
            _write_folder(out, made)
            return warnings
        text = made
    else:
        text, warnings = (inspect_log if fmt == "inspect" else jsonl).render(run)
    if not out.parent.is_dir():
        raise InputError(f"--out {out}: the folder {out.parent} does not exist")
    write_atomic(out, text)
    return warnings


def _check_folder(out: Path, fmt: str) -> None:
    """InputError unless `out` can become the export's folder (new, or empty; its parent there)."""
    if out.suffix in (".json", ".jsonl"):
        raise InputError(f"--out {out}: --format {fmt} writes a folder, not one file")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"--out {out}: exists and is not an empty folder; name a new folder for the export")
    if not out.parent.is_dir():
        raise InputError(f"--out {out}: the folder {out.parent} does not exist")


def _write_folder(out: Path, fill: Callable[[Path], None]) -> None:
    """`fill(folder)` writes every file into a temporary folder beside `out`, then renamed to `out` (all or
    nothing)."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.mkdir()
        fill(tmp)
        os.replace(tmp, out)  # over an empty folder too
    except OSError as exc:
        raise InputError(f"--out {out}: the folder could not be written: {exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_json(folder: Path, files: dict[str, dict[str, Any]]) -> None:
    for relative, doc in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


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
