"""The GAIA layout: a folder holding ``metadata.jsonl`` or ``metadata.parquet``, attachments beside it.

Columns ``task_id``, ``Question``, ``Level``, ``Final answer`` (required), optional ``file_name``
(the attachment) and others (metadata). The dataset root with a split resolves to
``ROOT/2023/<split>/``; a root holding one split needs none; a split folder or a ``metadata.*``
file given directly is read the same way (a --split given with it must name that folder).
The rows are read by harness/datasets/rows.py.
"""

from __future__ import annotations

from pathlib import Path

from harness.datasets import rows
from harness.datasets.model import Dataset
from harness.errors import InputError

FILES = ("metadata.jsonl", "metadata.parquet")
FORM = rows.Form("task_id", "Question", "Final answer", "Level", "file_name",
                 required=("task_id", "Question", "Final answer", "Level"), benchmark="gaia")


def detect(path: Path) -> Path | None:
    """`path` when it is a metadata file or a folder (GAIA is the layout of any other folder)."""
    return path if (path.is_file() and path.name in FILES) or path.is_dir() else None


def load(path: Path, split: str | None) -> Dataset:
    return rows.load(resolve(path, split), FORM, split)


def _metadata_in(folder: Path) -> Path | None:
    return next((folder / n for n in FILES if (folder / n).is_file()), None)


def resolve(path: Path, split: str | None) -> Path:
    """The metadata file to read, from the file itself, a split folder or a GAIA root (+ split)."""
    if path.is_file():
        if split is not None and path.parent.name != split:
            raise InputError(f"dataset file {path} is not in split folder {split!r}")
        return path
    direct = _metadata_in(path)
    if direct is not None:
        if split is not None and path.name != split:
            raise InputError(f"dataset folder {path} holds split {path.name!r}, not {split!r}")
        return direct
    found = sorted({p.parent.name for n in FILES for p in path.glob(f"2023/*/{n}")})
    if split is None and not found:
        raise InputError(f"dataset folder {path} holds no metadata.jsonl/metadata.parquet "
                         "(neither directly nor under 2023/<split>/)")
    if split is None and len(found) > 1:
        raise InputError(f"dataset {path} has several splits, choose one with --split: {', '.join(found)}")
    name = split if split is not None else found[0]
    chosen = _metadata_in(path / "2023" / name)
    if chosen is None:
        raise InputError(f"dataset {path}: no split {name!r} (no metadata.jsonl/metadata.parquet "
                         f"in {path / '2023' / name}); splits found: {', '.join(found) or 'none'}")
    return chosen
