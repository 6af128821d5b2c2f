"""Datasets: load GAIA-layout or plain files into `Instance`s, select, and fingerprint them.

`load_dataset` is imported lazily (PEP 562): processes that only use `Instance` (e.g. every agent
process) need none of it (pandas is imported only for CSV and parquet files).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from harness.datasets.model import Instance
# Eager on purpose: the submodule has the same name as the function, so a lazy import would let
# any `import harness.datasets.select` rebind the package attribute `select` to the module.
from harness.datasets.select import select
from harness.errors import InputError

if TYPE_CHECKING:
    from harness.datasets.load import load_dataset

__all__ = ["Instance", "load_dataset", "select", "dataset_fingerprint"]


def __getattr__(name: str) -> Any:
    if name == "load_dataset":
        from harness.datasets.load import load_dataset

        return load_dataset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"load_dataset"})


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
    """sha256 hex over ids, questions, answers, levels, file names and file contents.

    Independent of instance order and of where the dataset lies on disk. A task's own expectations
    (expected_tool_calls, max_steps, max_tokens) count where set. (A dataset just loaded carries it
    as `.fingerprint`: harness/datasets/cache.py.)
    """
    digest = hashlib.sha256()
    memo: dict[tuple[Path, str], object] = {}  # a file every instance shares (a corpus) is hashed once

    def attachment(root: Path, name: str) -> object:
        if (root, name) not in memo:
            memo[(root, name)] = _attachment(root, name)
        return memo[(root, name)]

    for inst in sorted(instances, key=lambda i: i.instance_id):
        record = [inst.instance_id, inst.question, inst.answer, inst.level,
                  [[name, attachment(inst.root, name)] for name in inst.files]]
        if expected := inst.expectations():
            record.append(expected)
        digest.update(json.dumps(record, ensure_ascii=True).encode() + b"\n")
    return digest.hexdigest()
