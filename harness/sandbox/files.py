"""Pack task files into one tar archive, refusing anything that escapes its root.

The archive is written to a file (a temporary one, see `archive_file`), never built in
memory: an instance's attachments may be hundreds of megabytes. Its size is known before
it is written (`archive_size`), so that the dataset loader refuses an instance whose files
pack to more than MAX_ARCHIVE_BYTES before any container starts.
"""

from __future__ import annotations

import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Final, NamedTuple

from harness.errors import InputError
from harness.fsutil import inside

# The most one instance's files may pack to: the largest upload the sandbox service accepts
# (sandboxd's MAX_BODY, harness.sandbox.service.MAX_BODY). Checked at dataset validation.
MAX_ARCHIVE_BYTES = 512 * 1024 * 1024
_FORMAT: Final = tarfile.PAX_FORMAT


def check_name(name: str) -> str:
    """A workspace-relative name: no absolute path, no '..', nothing empty."""
    if not name or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise InputError(f"file name {name!r} must be a relative path")
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if any(part == ".." for part in parts):
        raise InputError(f"file name {name!r} must not contain '..'")
    return "/".join(p for p in parts if p != ".")


class Member(NamedTuple):
    name: str  # the name asked for (one of `names`)
    arcname: str  # where it is stored in the archive
    real: Path  # what is read (symlinks resolved)
    size: int  # bytes of content (0 for a folder)
    is_dir: bool


def members(root: Path, names: Sequence[str]) -> Iterator[Member]:
    """What `build_archive` stores for root/NAME of each name, in order (raises InputError).

    Symlinks are followed only when they resolve inside root; their target's
    content is stored as a regular file. Nothing but files and folders is stored.
    """
    root = Path(root).resolve()
    for raw in names:
        name = check_name(raw)
        source = root / name
        if not source.exists() and not source.is_symlink():
            raise InputError(f"file {raw!r} not found under {root}")
        for path in [source, *sorted(source.rglob("*"))] if source.is_dir() else [source]:
            real = path.resolve()
            if not inside(root, real):
                raise InputError(f"file {raw!r}: {path} points outside {root} (to {real})")
            arcname = (PurePosixPath(name) / path.relative_to(source).as_posix()).as_posix()
            arcname = arcname.removesuffix("/.")
            if real.is_dir():
                yield Member(raw, arcname, real, 0, True)
            elif real.is_file():
                yield Member(raw, arcname, real, real.stat().st_size, False)
            else:
                raise InputError(f"file {raw!r}: {path} is not a regular file or folder")


def _info(member: Member) -> tarfile.TarInfo:
    info = tarfile.TarInfo(member.arcname)
    if member.is_dir:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    else:
        info.size, info.mode, info.mtime = member.size, 0o644, int(member.real.stat().st_mtime)
    return info


def stored_size(member: Member) -> int:
    """Bytes `member` takes in the archive: its header(s) and its content padded to blocks."""
    header = _info(member).tobuf(_FORMAT, tarfile.ENCODING, "surrogateescape")
    return len(header) + -(-member.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE


def packed_size(stored: int) -> int:
    """The archive's size from the sum of its members' stored sizes: the end-of-archive blocks,
    then padding to a whole record (what tarfile writes on close)."""
    total = stored + 2 * tarfile.BLOCKSIZE
    return -(-total // tarfile.RECORDSIZE) * tarfile.RECORDSIZE


def archive_size(root: Path, names: Sequence[str]) -> int:
    """The exact size of the archive `build_archive` writes for these names, without writing it."""
    return packed_size(sum(stored_size(m) for m in members(root, names)))


def build_archive(root: Path, names: Sequence[str], out: BinaryIO) -> int:
    """Write the tar of root/NAME for each name (files or folders, stored under NAME) to `out`,
    a binary file, streaming each file's content; returns the bytes written. Raises InputError
    (see `members`) before writing a member that cannot be stored."""
    start = out.tell()
    with tarfile.open(fileobj=out, mode="w", format=_FORMAT) as tar:
        for member in members(root, names):
            info = _info(member)
            if member.is_dir:
                tar.addfile(info)
            else:
                with open(member.real, "rb") as fh:
                    tar.addfile(info, fh)
    return out.tell() - start


@contextmanager
def archive_file(root: Path, names: Sequence[str]) -> Iterator[tuple[BinaryIO, int]]:
    """The archive of these names in an anonymous temporary file, rewound: (file, size)."""
    with tempfile.TemporaryFile(prefix="harness-archive-") as fh:
        size = build_archive(root, names, fh)
        fh.seek(0)
        yield fh, size
