"""Attachments checked as the sandbox packer will pack them (harness/sandbox/files.py).

Each attachment must be a readable file or folder inside the dataset folder (a symlink may
point only inside it; a folder is walked entry by entry), and one instance's files together
must pack to at most ``MAX_ARCHIVE_BYTES`` (512 MiB, the largest upload a sandbox accepts).
`Checks` does each check once per unique name or set of names: datasets often share one
attachment among thousands of rows (a corpus, a database).
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.errors import InputError
from harness.fsutil import inside
from harness.sandbox import files as packer
from harness.sandbox.files import check_name


def entry_problem(root: Path, path: Path, shown: str) -> str | None:
    """What stops the sandbox packer from storing `path`, as `build_archive` judges it, or None."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # e.g. a symlink loop
        return f"{shown} at {path} cannot be resolved ({exc})"
    if not inside(root, real):
        return f"{shown} points outside the dataset folder (to {real})"
    if real.is_dir():
        mode = os.R_OK | os.X_OK
    elif real.is_file():
        mode = os.R_OK
    else:
        return f"{shown} at {path} is not a regular file or folder"
    if not os.access(path, mode):
        return f"{shown} at {path} is not readable"
    return None


def attachment_problems(root: Path, name: str) -> list[str]:
    """Every problem with attachment `name`, walking folders with the sandbox packer's rules."""
    target = root / name
    if not target.exists():
        return [f"attachment {name!r} not found at {target}"]
    if (problem := entry_problem(root, target, f"attachment {name!r}")) is not None:
        return [problem]
    if not target.is_dir():
        return []
    problems: list[str] = []
    try:
        entries = sorted(target.rglob("*"))
    except OSError as exc:
        return [f"attachment {name!r} at {target} cannot be listed ({exc})"]
    for path in entries:
        inner = f"{name}/{path.relative_to(target).as_posix()}"
        if (problem := entry_problem(root, path, f"attachment {name!r}: {inner!r}")) is not None:
            problems.append(problem)
    return problems


def _human(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def size_problem(root: Path, names: list[str]) -> str | None:
    """What is wrong with the size of an instance's files, packed as the sandbox packer packs
    them (an archive over packer.MAX_ARCHIVE_BYTES cannot be sent into a sandbox), or None."""
    stored, sizes = 0, dict[str, int]()
    try:
        for member in packer.members(root, names):
            stored += packer.stored_size(member)
            sizes[member.name] = sizes.get(member.name, 0) + member.size
    except (InputError, OSError) as exc:
        return f"attachments cannot be measured ({exc})"
    total, limit = packer.packed_size(stored), packer.MAX_ARCHIVE_BYTES
    if total <= limit:
        return None
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:3]
    shown = ", ".join(f"{name!r} ({_human(size)})" for name, size in largest)
    return (f"attachments pack to {total} bytes, over the limit of {limit} bytes ({_human(limit)}) "
            f"per instance; largest: {shown}")


class Checks:
    """The attachment checks of one load under dataset folder `root`, each done once."""

    def __init__(self, root: Path):
        self.root = root
        self._problems: dict[str, list[str]] = {}
        self._sizes: dict[tuple[str, ...], str | None] = {}
        self._names: dict[str, tuple[str, str | None]] = {}

    def name(self, raw: str) -> tuple[str, str | None]:
        """(the checked name, None) or (raw, the problem with it)."""
        if raw not in self._names:
            try:
                self._names[raw] = (check_name(raw), None)
            except InputError as exc:
                self._names[raw] = (raw, str(exc))
        return self._names[raw]

    def attachment(self, name: str) -> list[str]:
        if name not in self._problems:
            self._problems[name] = attachment_problems(self.root, name)
        return self._problems[name]

    def size(self, names: list[str]) -> str | None:
        key = tuple(names)
        if key not in self._sizes:
            self._sizes[key] = size_problem(self.root, names)
        return self._sizes[key]
