"""MATH-500 (HuggingFaceH4/MATH-500 ``test.jsonl``) into `Instance`s.

Layout: JSONL, one problem per line with ``problem``, ``answer`` (LaTeX, no ``\\boxed``),
``unique_id`` (e.g. ``test/precalculus/807.json``), and optional ``solution``, ``subject``,
``level`` (``3`` or ``"Level 3"``). A ``.jsonl`` whose first row has ``problem``, ``answer`` and
``unique_id`` is read this way, as is a folder holding such a ``test.jsonl``.

instance_id = unique_id; question = problem; answer = answer; level = the level's number;
``subject``, ``solution`` and every other field go to metadata. Every row is checked before
anything is returned; problems raise one InputError naming each row ('line N').
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.datasets.fingerprint import dataset_fingerprint
from harness.datasets.model import Dataset, Instance
from harness.datasets.problems import raise_problems, refuse_split
from harness.errors import InputError

FILE_NAME = "test.jsonl"
REQUIRED = ("problem", "answer", "unique_id")
_LEVEL = re.compile(r"^\s*(?:level\s*)?(\d+)\s*$", re.IGNORECASE)


def detect(path: Path) -> Path | None:
    """The MATH-500 file at `path` (a .jsonl file or a folder holding test.jsonl), else None."""
    file = path / FILE_NAME if path.is_dir() else path
    if file.suffix.lower() != ".jsonl" or not file.is_file():
        return None
    try:
        with open(file, encoding="utf-8") as handle:
            first = next((line for line in handle if line.strip()), "")
        row = json.loads(first)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return file if isinstance(row, dict) and all(k in row for k in REQUIRED) else None


def parse_level(value: Any) -> int | None:
    """3, "3" or "Level 3" -> 3; None or "" -> None; anything else raises ValueError."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _LEVEL.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"level {value!r} is neither a number nor 'Level N'")
    return int(match.group(1))


def _text(row: dict, key: str) -> str | None:
    value = row.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    return value if isinstance(value, str) and value.strip() else None


def instance_of(row: dict, root: Path) -> Instance:
    """One row as an Instance; ValueError says what is wrong with it."""
    problem, answer, unique_id = (_text(row, k) for k in REQUIRED)
    if problem is None or answer is None or unique_id is None:
        missing = [k for k in REQUIRED if _text(row, k) is None]
        raise ValueError(f"empty or missing {', '.join(map(repr, missing))}")
    try:
        level = parse_level(row.get("level"))
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    metadata = {k: v for k, v in row.items() if k not in ("problem", "answer", "unique_id", "level")}
    return Instance(instance_id=unique_id, question=problem, answer=answer, root=root, level=level,
                    metadata=metadata, benchmark="math500")


def load(file: Path, split: str | None = None) -> Dataset:
    """Every row of the MATH-500 file; raises InputError listing every bad row (a --split: refused)."""
    refuse_split(split, file)
    problems: list[str] = []
    instances: list[Instance] = []
    seen: dict[str, int] = {}
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"dataset file {file} could not be read: {exc}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError(f"expected a JSON object, got {type(row).__name__}")
            instance = instance_of(row, file.parent.resolve())
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: invalid JSON ({exc.msg} at column {exc.colno})")
            continue
        except ValueError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        if instance.instance_id in seen:
            problems.append(f"line {number}: duplicate unique_id {instance.instance_id!r} "
                            f"(first at line {seen[instance.instance_id]})")
            continue
        seen[instance.instance_id] = number
        instances.append(instance)
    if problems:
        raise_problems(f"{file} (MATH-500 layout)", problems)
    if not instances:
        raise InputError(f"dataset {file} (MATH-500 layout) holds no problems")
    return Dataset(instances, dataset_fingerprint(instances))
