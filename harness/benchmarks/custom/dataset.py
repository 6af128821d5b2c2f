"""The plain form: a ``.jsonl``, ``.csv`` or ``.parquet`` file, attachments beside it.

Columns ``instance_id``, ``question``, ``answer`` (required), optional ``files`` (a list; in CSV
';'-joined or a JSON list) and ``level``; every other column goes to metadata. The seed's names
``id``, ``prompt`` and ``expected_answer`` are accepted for the first three where the canonical
column is absent. A file has no splits. The rows are read by harness/datasets/rows.py.
"""

from __future__ import annotations

from pathlib import Path

from harness.datasets import rows
from harness.datasets.model import Dataset
from harness.datasets.problems import refuse_split
from harness.datasets.tabular import SUFFIXES
from harness.errors import InputError

ALIASES = (("id", "instance_id"), ("prompt", "question"), ("expected_answer", "answer"))  # the seed's task schema
FORM = rows.Form("instance_id", "question", "answer", "level", "files",
                 required=("instance_id", "question", "answer"), aliases=ALIASES)


def detect(path: Path) -> Path | None:
    """`path` when it is a file (the plain form is the layout of any other file)."""
    return path if path.is_file() else None


def load(file: Path, split: str | None) -> Dataset:
    refuse_split(split, f"file {file}")
    if file.suffix.lower() not in SUFFIXES:
        raise InputError(f"dataset file {file}: unknown extension {file.suffix or '(none)'!r} "
                         "(expected .jsonl, .csv or .parquet, or a GAIA folder)")
    return rows.load(file, FORM, split)
