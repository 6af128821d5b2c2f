"""DIR/output.jsonl: one JSON line per finished (instance, epoch), appended durably.

Each row is written with a single os.write on an O_APPEND fd and fsync'd, so a
crash can at worst leave one torn line at the end; readers skip it and
`repair` truncates it before a resumed run appends again.

When the file stops taking rows mid-run (disk full, permissions, a vanished mount),
`RowWriter` retries, then holds the rows it could not write and `rescue` puts them in
DIR/output.rescue.jsonl (or, when the directory refuses too, a file in the temporary
directory). The next run into DIR merges DIR/output.rescue.jsonl (`merge_rescue`)
before it decides what is left to run, so a resume loses none of them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from harness.errors import InputError
from harness.fsutil import slug
from harness.results.layout import RunDir
from harness.results.model import ResultRow
from harness.text import model_json

log = logging.getLogger(__name__)
_lock = threading.Lock()


@dataclass
class Loaded:
    rows: list[Any] = field(default_factory=list)  # ResultRow, or RowKey when scanned for resuming
    torn: bool = False  # the file ends with a partial or unparsable line (ignored)
    good_size: int = 0  # bytes up to the end of the last intact line
    # (line number, bytes) of lines before the last that are cut short or not rows (load(damaged_ok=True))
    damaged: list[tuple[int, bytes]] = field(default_factory=list)


def append_row(path: Path, row: ResultRow) -> None:
    """Append `row` as one line: one write on an O_APPEND fd, then fsync.

    A write that fails or is cut short (a full disk) is truncated back to the file's size before
    it, so a retry starts on a fresh line: never a partial row and a whole one on one line. A file
    that already ends mid-line (that truncation failed too) takes no more rows."""
    path = Path(path)
    data = (model_json(row) + "\n").encode()
    with _lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                raise OSError(errno.EIO, f"{path} ends with a partial line that could not be removed")
            try:
                written = os.write(fd, data)
                if written != len(data):  # disk full or similar: the line would be torn
                    raise OSError(errno.ENOSPC, f"short write to {path}: {written} of {len(data)} bytes, "
                                                "truncated back")
                os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)


def load(path: Path, model: type[ResultRow] | type[RowKey] = ResultRow, *, damaged_ok: bool = False) -> Loaded:
    """Parse the file line by line (never whole in memory) into `model` (RowKey: only what resume
    needs, several times faster); a torn last line is flagged. A damaged earlier line (cut short, two
    rows glued on one line, not a row) is an InputError naming its line and the fix, or with
    `damaged_ok` listed in `damaged` and skipped (what a run sets aside: harness/results/integrity.py)."""
    path = Path(path)
    out = Loaded()
    if not path.exists():
        return out
    parse, append = model.model_validate_json, out.rows.append
    with open(path, "rb") as fh:
        number, offset, good, bad = 0, 0, 0, None
        for raw in fh:
            number += 1
            if bad is not None:  # a bad line followed by more lines: damaged, not torn
                if not damaged_ok:
                    first = str(bad[2]).splitlines()[0]
                    raise InputError(f"{path}:{bad[0]}: corrupt result row ({first}); run `harness run` with the "
                                     f"run's command into {path.parent} to set the line aside (its instance runs "
                                     f"again), or remove line {bad[0]}") from bad[2]
                out.damaged.append(bad[:2])
                bad = None
            if not raw.endswith(b"\n"):  # the last line, cut short by a crash mid-write
                out.torn = True
                break
            offset += len(raw)
            if not raw.isspace():
                try:
                    append(parse(raw))
                except (ValidationError, ValueError) as exc:
                    bad = (number, raw, exc)
                    continue
            good = offset
        if bad is not None:  # the last complete line does not parse: torn, not damaged
            out.torn = True
    out.good_size = good
    return out


def read_rows(path: Path) -> list[ResultRow]:
    """All intact rows; a torn last line is skipped with a warning. Missing file -> []."""
    loaded = load(path)
    if loaded.torn:
        log.warning("%s: ignoring a torn last line (an interrupted write)", path)
    return loaded.rows


def repair(path: Path, loaded: Loaded | None = None) -> bool:
    """Truncate a torn last line away so later appends start on a fresh line (`loaded`: the caller's
    own reading of the file, so it is not parsed again)."""
    with _lock:
        loaded = load(path, RowKey) if loaded is None else loaded
        if not loaded.torn:
            return False
        with open(path, "r+b") as fh:
            fh.truncate(loaded.good_size)
            fh.flush()
            os.fsync(fh.fileno())
        log.warning("%s: removed a torn last line", path)
        return True


class _Key(BaseModel):
    instance_id: str
    epoch: int = 1
    status: str
    instance_hash: str | None = None


class RowKey(NamedTuple):
    """What resuming needs of a row: its instance, epoch, status and content hash (the rest is not read).
    A tuple: a 100k resume makes one per row, and a tuple is made in half a dataclass's time."""

    instance_id: str
    epoch: int
    status: str
    instance_hash: str | None = None

    @property
    def finished(self) -> bool:
        return self.status != "error"

    @classmethod
    def model_validate_json(cls, raw: bytes) -> RowKey:
        """A row written by append_row starts with these fields in ResultRow's order: they are read off
        the line's head (about a microsecond, not a parse of the whole ~1 KB line) when the line looks
        whole: a closing brace at its end and as many opening braces as closing ones (a row cut short
        lacks some, and so does a part of a row glued to a whole one). Any other line (older rows, rows
        written by hand, braces inside strings, a damaged row) is parsed in full, so a damaged line is
        found here, before the run, not by the report after it."""
        head = _match(raw)
        if head is None or not raw.endswith(b"}\n") or raw.count(b"{") != raw.count(b"}"):
            key = _Key.model_validate_json(raw)
            return cls(key.instance_id, key.epoch, key.status, key.instance_hash)
        literal, digest = head[1], head[4]
        ident = literal[1:-1].decode() if b"\\" not in literal else json.loads(literal)
        return _tuple(cls, (ident, int(head[2]), _STATUS[head[3]], digest.decode() if digest else None))


_HEAD = re.compile(rb'^\{"instance_id":("(?:[^"\\]|\\.)*"),"epoch":(\d+),"attempt":\d+,"status":"(ok|limit|error)",'
                   rb'(?:"instance_hash":(?:"([0-9a-f]*)"|null),)?')
_match, _tuple = _HEAD.match, tuple.__new__
_STATUS = {b"ok": "ok", b"limit": "limit", b"error": "error"}


def latest_by_key(rows: list[ResultRow]) -> dict[tuple[str, int], ResultRow]:
    """The last row per (instance id, epoch): a re-run appends; the latest wins."""
    return {(row.instance_id, row.epoch): row for row in rows}


def pending(instance_ids: list[str], rows: list[ResultRow], epochs: int = 1) -> tuple[list[tuple[str, int]],
                                                                                       list[tuple[str, int]]]:
    """(to_run, already_done) as (instance id, epoch) in the order given, epochs of an id together:
    errored or absent ones run again."""
    latest = latest_by_key(rows).get
    to_run: list[tuple[str, int]] = []
    done: list[tuple[str, int]] = []
    numbers = range(1, epochs + 1)
    for iid in instance_ids:
        for epoch in numbers:
            key = (iid, epoch)
            row = latest(key)
            (done if row is not None and row.finished else to_run).append(key)
    return to_run, done


class RowWriter:
    """Appends a run's rows to output.jsonl. A failed append is retried (`attempts` in all,
    backing off); after that the writer is `failed` and holds that row and every later one
    for `rescue`: a file that failed once is not trusted with the rest of the run."""

    def __init__(self, path: Path, *, attempts: int = 3, backoff: float = 0.2):
        self.path, self.attempts, self.backoff = Path(path), attempts, backoff
        self.failed: OSError | None = None
        self.held: list[ResultRow] = []

    def write(self, row: ResultRow) -> bool:
        """True when the row is durably in output.jsonl; False when it is held instead."""
        for attempt in range(self.attempts if self.failed is None else 0):
            try:
                append_row(self.path, row)
                return True
            except OSError as exc:
                log.warning("cannot append to %s (attempt %d): %s", self.path, attempt + 1, exc)
                if attempt + 1 == self.attempts:
                    self.failed = exc
                else:
                    time.sleep(self.backoff * (attempt + 1))
        self.held.append(row)
        return False


def rescue_path(output: Path) -> Path:
    """Where the rows output.jsonl would not take go; the next run into the directory merges them."""
    return RunDir(Path(output).parent).rescue


def rescue(output: Path, rows: list[ResultRow]) -> Path | None:
    """Append `rows` durably beside output.jsonl, else in the temporary directory; return the
    file, or None when no place took them (the caller prints them)."""
    output = Path(output)
    fallback = Path(tempfile.gettempdir()) / f"harness-rescue-{slug(output.parent.name, 40)}-{os.getpid()}.jsonl"
    for place in (rescue_path(output), fallback):
        try:
            for row in rows:
                append_row(place, row)
            return place
        except OSError as exc:
            log.warning("cannot write rescued rows to %s: %s", place, exc)
    return None


def merge_rescue(output: Path) -> int:
    """Append the rows of DIR/output.rescue.jsonl to output.jsonl, then remove it; return how many.

    A row already in output.jsonl (the append got through before it failed) is not added
    twice, nor one older than the instance's latest row there (a later run re-ran it)."""
    output = Path(output)
    source = rescue_path(output)
    if not source.exists():
        return 0
    rescued = load(source).rows  # a torn last line of a crashed rescue is skipped
    present = read_rows(output)
    seen = {model_json(row) for row in present}
    latest = {(row.instance_id, row.epoch): row.finished_at for row in present}
    added = 0
    for row in rescued:
        if model_json(row) in seen or latest.get((row.instance_id, row.epoch), "") > row.finished_at:
            continue
        append_row(output, row)
        added += 1
    source.unlink()
    return added
