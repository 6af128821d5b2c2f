"""Pack task files into one tar archive, refusing anything that escapes its root."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path, PurePosixPath
from typing import Sequence

from harness.errors import InputError
from harness.fsutil import inside


def check_name(name: str) -> str:
    """A workspace-relative name: no absolute path, no '..', nothing empty."""
    if not name or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise InputError(f"file name {name!r} must be a relative path")
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if any(part == ".." for part in parts):
        raise InputError(f"file name {name!r} must not contain '..'")
    return "/".join(p for p in parts if p != ".")


def build_archive(root: Path, names: Sequence[str]) -> bytes:
    """Tar of root/NAME for each name (files or folders), stored under NAME.

    Symlinks are followed only when they resolve inside root; their target's
    content is stored as a regular file. Nothing but files and folders is stored.
    """
    root = Path(root).resolve()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
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
                    info = tarfile.TarInfo(arcname)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                elif real.is_file():
                    info = tarfile.TarInfo(arcname)
                    info.size, info.mode, info.mtime = real.stat().st_size, 0o644, int(real.stat().st_mtime)
                    with open(real, "rb") as fh:
                        tar.addfile(info, fh)
                else:
                    raise InputError(f"file {raw!r}: {path} is not a regular file or folder")
    return buffer.getvalue()
