"""Read a tabular dataset file (JSON lines, CSV, parquet) into rows of raw cells.

JSON lines are read with the standard library, line by line, a bad line being a problem naming
it; CSV (every cell as text, blanks kept as '') and parquet (nullable types) through pandas.
This is the only module that imports pandas (a 100 MB import), and only when it reads CSV or
parquet: loading a JSON lines dataset never imports it. A file that cannot be read at all is
one InputError naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import InputError

SUFFIXES = (".jsonl", ".csv", ".parquet")


@dataclass(frozen=True)
class Table:
    records: list[dict[str, Any]]  # one dict of raw cells per row
    labels: list[str]  # per row: 'line N' (JSON lines, the file's line) or 'row N'
    header: list[str]  # the columns a header names (none for JSON lines)


def read(file: Path, problems: list[str]) -> Table:
    """The rows of `file`; bad JSON lines are appended to `problems` and skipped."""
    suffix = file.suffix.lower()
    try:
        if suffix == ".jsonl":
            return _read_jsonl(file, problems)
        import pandas as pd

        try:
            if suffix == ".csv":
                frame = pd.read_csv(file, dtype=str, keep_default_na=False)
            else:
                frame = pd.read_parquet(file, dtype_backend="numpy_nullable")
        except pd.errors.ParserError as exc:
            raise ValueError(str(exc)) from exc
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"dataset file {file} could not be read: {exc}") from exc
    return Table(frame.astype(object).to_dict(orient="records"), [f"row {i}" for i in range(1, len(frame) + 1)],
                 [str(c) for c in frame.columns])


def _read_jsonl(file: Path, problems: list[str]) -> Table:
    records: list[dict[str, Any]] = []
    labels: list[str] = []
    with open(file, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"line {number}: invalid JSON ({exc.msg} at column {exc.colno})")
                continue
            if not isinstance(record, dict):
                problems.append(f"line {number}: expected a JSON object, got {type(record).__name__}")
                continue
            records.append(record)
            labels.append(f"line {number}")
    return Table(records, labels, [])
