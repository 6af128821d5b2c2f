"""How every dataset loader reports what is wrong: all problems at once, in one InputError.

A loader collects every problem of every row (naming the row: 'line N', 'row N', 'item N')
before it returns anything, then raises once through `raise_problems`, which shows the first
MAX_REPORTED and counts the rest. A problem that stops the load before any row is read (a
missing file, a flag that does not apply) is an InputError of its own, one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from harness.errors import InputError

MAX_REPORTED = 20


def raise_problems(where: str | Path, problems: list[str]) -> NoReturn:
    """One InputError listing the first MAX_REPORTED problems of dataset `where`."""
    shown = [f"  - {p}" for p in problems[:MAX_REPORTED]]
    if len(problems) > MAX_REPORTED:
        shown.append(f"  ... and {len(problems) - MAX_REPORTED} more")
    raise InputError(f"dataset {where}: {len(problems)} problem(s):\n" + "\n".join(shown))


def refuse_split(split: str | None, what: str | Path) -> None:
    """--split names a GAIA split folder; any other dataset (`what`) refuses it."""
    if split is not None:
        raise InputError(f"--split {split!r} applies to a GAIA dataset folder, not to {what}")
