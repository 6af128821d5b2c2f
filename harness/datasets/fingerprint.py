"""A dataset's fingerprint: what a run's results rest on, independent of order and location.

sha256 over ids, questions, answers, levels, file names and file contents (a folder attachment:
every file inside by relative path), and, where set, a task's own expectations (expected_tool_calls,
max_steps, max_tokens) and the image its sandbox runs from. A missing attachment still counts, as
absent. A dataset just loaded carries it (`Dataset.fingerprint`, model.py; kept with the cached
instances: cache.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from harness.datasets.model import Instance
from harness.errors import InputError


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise InputError(f"dataset attachment {path} could not be read for the fingerprint: "
                         f"{exc.strerror or exc}") from exc
    return digest.hexdigest()


def _attachment(root: Path, name: str) -> object:
    """A digest of one attachment: its bytes, or for a folder every file inside by relative path."""
    target = root / name
    if target.is_file():
        return _file_digest(target)
    if target.is_dir():
        return [[p.relative_to(target).as_posix(), _file_digest(p)]
                for p in sorted(target.rglob("*")) if p.is_file()]
    return None  # missing: still part of the fingerprint, as absent


def dataset_fingerprint(instances: Iterable[Instance]) -> str:
    """sha256 hex of the dataset (see the module's docstring)."""
    digest = hashlib.sha256()
    memo: dict[tuple[Path, str], object] = {}  # a file every instance shares (a corpus) is hashed once

    def attachment(root: Path, name: str) -> object:
        if (root, name) not in memo:
            memo[(root, name)] = _attachment(root, name)
        return memo[(root, name)]

    for inst in sorted(instances, key=lambda i: i.instance_id):
        record: list[object] = [inst.instance_id, inst.question, inst.answer, inst.level,
                                [[name, attachment(inst.root, name)] for name in inst.files]]
        if expected := inst.expectations():
            record.append(expected)
        if inst.image is not None:
            record.append({"image": inst.image})
        if (task := inst.metadata.get("task_hash")) is not None:  # a Harbor task folder's whole content
            record.append({"task": task})
        digest.update(json.dumps(record, ensure_ascii=True).encode() + b"\n")
    return digest.hexdigest()
