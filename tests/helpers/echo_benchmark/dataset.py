"""A `.echo` file: one instance per word."""

from pathlib import Path

from harness.datasets.fingerprint import dataset_fingerprint
from harness.datasets.model import Dataset, Instance
from harness.datasets.problems import refuse_split


def detect(path: Path) -> Path | None:
    return path if path.suffix == ".echo" and path.is_file() else None


def load(found: Path, split: str | None) -> Dataset:
    refuse_split(split, found)
    instances = [Instance(instance_id=f"echo-{n}", question=f"Say {word!r} back.", answer=word, root=found.parent,
                          benchmark="echo") for n, word in enumerate(found.read_text().split(), 1)]
    return Dataset(instances, dataset_fingerprint(instances))
