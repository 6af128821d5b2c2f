"""Small filesystem helpers, one for each job: atomic writes, whether a disk still takes data, path
confinement, file-safe names."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
from pathlib import Path


def write_atomic(path: Path, data: str | bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` all at once: readers see the old file or the new one, never a
    part; a crash leaves at worst a stray temporary file beside it, never a torn target.
    durable=False skips the fsync, for files no one reads after a machine crash (a scratch file
    one process hands another): still atomic, without the wait on the disk. A write that fails
    (a full disk) removes its temporary file, so it takes no space."""
    path = Path(path)
    # one temporary file per process and thread: threads of one process may write the same path at once
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def refuses_data(directory: Path) -> OSError | None:
    """The error `directory`'s disk refuses one more byte with right now (a full disk, a read-only mount),
    else None. The probe is an unnamed temporary file, gone either way."""
    try:
        with tempfile.TemporaryFile(dir=directory, buffering=0) as fh:
            fh.write(b"\0")
            os.fsync(fh.fileno())
    except OSError as exc:
        return exc
    return None


def inside(root: str | Path, path: str | Path) -> bool:
    """True when `path` is `root` or below it (both already resolved: no symlinks, no '..')."""
    return os.path.commonpath([str(root), str(path)]) == str(root)


def slug(text: str, limit: int) -> str:
    """A readable, file- and container-name-safe form of text, at most `limit` characters."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-._")
    return cleaned[:limit].rstrip("-._") or "x"


def tree_hash(root: Path) -> str:
    """A digest of every file's relative path and bytes (caches of Python left out)."""
    digest = hashlib.sha256()
    files = (p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    for path in sorted(files):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]
