"""Load a dataset into `Instance`s: the first format adapter that recognises the path reads it.

An adapter is a module with ``detect(path) -> Path | None`` (what it would read at `path`, or None
when the path is not in its format) and ``load(found, split) -> list[Instance]`` (every row
validated before anything is returned; InputError listing every problem: harness/datasets/
problems.py). They are asked in `ADAPTERS` order, the specific layouts before the general ones:

- MATH-500 (math500.py): a ``.jsonl`` whose first row has ``problem``, ``answer``, ``unique_id``,
  or a folder holding such a ``test.jsonl``;
- MultiHop-RAG (multihoprag.py): ``MultiHopRAG.json`` with ``corpus.json`` beside it;
- Harbor (harbor.py): a folder holding ``task.toml`` (one task) or sub-folders holding one; ``harbor:PATH``
  names such a folder outright;
- Gaia2 (gaia2.py): a folder of ARE scenario ``*.json`` files, or a ``.jsonl`` of scenarios (or of
  Hub rows holding one in ``data``);
- GAIA (gaia.py): a ``metadata.jsonl``/``metadata.parquet`` file, or any other folder (a split
  folder or a root with ``2023/<split>/``);
- plain (plain.py): any other file, ``.jsonl``, ``.csv`` or ``.parquet``.

A Hub reference, ``hf://OWNER/NAME[@REVISION]`` (hub.py), is downloaded first and its local
folder read by the same adapters, and the `Dataset` (model.py) carries the commit sha as its
`revision`. Only GAIA and plain files are cached
between runs (cache.py; a Gaia2 JSONL's scenarios are written to files once, to be sent to the sandbox); reading CSV and parquet is the only use of pandas (tabular.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Protocol

from harness.bulk import collector_paused
from harness.datasets import gaia, gaia2, harbor, hub, math500, multihoprag, plain
from harness.datasets.model import Dataset
from harness.errors import InputError


class Adapter(Protocol):
    def detect(self, path: Path) -> Path | None: ...

    def load(self, found: Path, split: str | None) -> Dataset: ...


ADAPTERS: tuple[Adapter, ...] = (math500, multihoprag, harbor, gaia2, gaia, plain)


def load_dataset(path: str | Path, split: str | None = None) -> Dataset:
    """The dataset at `path` (a Hub reference too): every instance and their fingerprint; raises
    InputError listing every problem found."""
    if str(path).startswith(harbor.PREFIX):  # harbor:PATH, a Harbor task folder or a folder of them
        return harbor.load(Path(str(path).removeprefix(harbor.PREFIX)).expanduser(), split)
    if (ref := hub.parse(path)) is not None:
        folder, sha = hub.fetch(ref, split)
        return replace(_load_local(folder, split), revision=sha)
    return _load_local(Path(path), split)


def _load_local(path: Path, split: str | None) -> Dataset:
    path = path.expanduser()
    for adapter in ADAPTERS:
        if (found := adapter.detect(path)) is not None:
            with collector_paused():  # harness/bulk.py
                return adapter.load(found, split)
    if not path.exists():
        raise InputError(f"dataset path {path} does not exist")
    raise InputError(f"dataset path {path} is neither a file nor a folder")
