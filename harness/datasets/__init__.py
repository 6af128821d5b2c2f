"""Datasets: load GAIA-layout or plain files into `Instance`s, select, and fingerprint them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable

from harness.datasets.load import load_dataset
from harness.datasets.model import Instance
from harness.datasets.select import select

__all__ = ["Instance", "load_dataset", "select", "dataset_fingerprint"]


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
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

    Independent of instance order and of where the dataset lies on disk.
    """
    digest = hashlib.sha256()
    for inst in sorted(instances, key=lambda i: i.instance_id):
        record = [inst.instance_id, inst.question, inst.answer, inst.level,
                  [[name, _attachment(inst.root, name)] for name in inst.files]]
        digest.update(json.dumps(record, ensure_ascii=True).encode() + b"\n")
    return digest.hexdigest()
