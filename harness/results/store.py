"""DIR/output.jsonl: one JSON line per finished attempt, appended durably.

Each row is written with a single os.write on an O_APPEND fd and fsync'd, so a
crash can at worst leave one torn line at the end; readers skip it and
`repair` truncates it before a resumed run appends again.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from harness.errors import InputError
from harness.results.model import ResultRow

log = logging.getLogger(__name__)
_lock = threading.Lock()


@dataclass
class Loaded:
    rows: list[ResultRow] = field(default_factory=list)
    torn: bool = False  # the file ends with a partial or unparsable line (ignored)
    good_size: int = 0  # bytes up to the end of the last intact line


def append_row(path: Path, row: ResultRow) -> None:
    """Append `row` as one line: one write on an O_APPEND fd, then fsync."""
    path = Path(path)
    data = (row.model_dump_json() + "\n").encode()
    with _lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, data)
            if written != len(data):  # disk full or similar: the line is torn
                raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
            os.fsync(fd)
        finally:
            os.close(fd)


def load(path: Path) -> Loaded:
    """Parse the file; a torn last line is flagged, a corrupt earlier line is an InputError."""
    path = Path(path)
    if not path.exists():
        return Loaded()
    data = path.read_bytes()
    pieces = data.split(b"\n")
    tail = pieces.pop()  # b"" when the file ends with a newline, else a torn line
    out = Loaded(torn=bool(tail))
    offset = 0
    for number, raw in enumerate(pieces, start=1):
        if raw.strip():
            try:
                out.rows.append(ResultRow.model_validate_json(raw))
            except (ValidationError, ValueError) as exc:
                if number == len(pieces) and not tail:  # the last line: torn, not corrupt
                    out.torn = True
                    break
                first = str(exc).splitlines()[0]
                raise InputError(f"{path}:{number}: corrupt result row ({first})") from exc
        offset += len(raw) + 1
        out.good_size = offset
    return out


def read_rows(path: Path) -> list[ResultRow]:
    """All intact rows; a torn last line is skipped with a warning. Missing file -> []."""
    loaded = load(path)
    if loaded.torn:
        log.warning("%s: ignoring a torn last line (an interrupted write)", path)
    return loaded.rows


def repair(path: Path) -> bool:
    """Truncate a torn last line away so later appends start on a fresh line."""
    with _lock:
        loaded = load(path)
        if not loaded.torn:
            return False
        with open(path, "r+b") as fh:
            fh.truncate(loaded.good_size)
            fh.flush()
            os.fsync(fh.fileno())
        log.warning("%s: removed a torn last line", path)
        return True


def latest_by_instance(rows: list[ResultRow]) -> dict[str, ResultRow]:
    """The last row per instance id (a re-run appends; the latest wins)."""
    return {row.instance_id: row for row in rows}


def pending(instance_ids: list[str], rows: list[ResultRow]) -> tuple[list[str], list[str]]:
    """(to_run, already_done) in the order given: errored or absent ids run again."""
    latest = latest_by_instance(rows)
    to_run: list[str] = []
    done: list[str] = []
    for iid in instance_ids:
        row = latest.get(iid)
        (done if row is not None and row.finished else to_run).append(iid)
    return to_run, done
