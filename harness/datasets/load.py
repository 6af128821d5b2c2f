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

``--subset C`` reads the folder ``C/`` of the dataset (a Hub config laid out one folder per config, as
Gaia2's; a local copy of such a repository too). A Hub reference, ``hf://OWNER/NAME[@REVISION]`` (hub.py),
is downloaded first (with a subset, that folder alone) and its local folder read by the same adapters,
and the `Dataset` (model.py) carries the commit sha as its `revision`. Only GAIA and plain files are
cached between runs (cache.py; a Gaia2 scenario of a JSONL or parquet row is written to a file once, to be
sent to the sandbox); reading CSV and parquet is the only use of pandas (tabular.py; Gaia2's parquet rows are
read with pyarrow, a batch at a time).
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


def load_dataset(path: str | Path, split: str | None = None, subset: str | None = None) -> Dataset:
    """The dataset at `path` (a Hub reference too), its `subset` folder when one is named: every instance
    and their fingerprint; raises InputError listing every problem found."""
    if subset is not None and (not subset.strip() or any(c in subset for c in "/\\*?[") or subset in (".", "..")):
        raise InputError(f"--subset {subset!r}: a subset is the name of one folder of the dataset (a config)")
    if str(path).startswith(harbor.PREFIX):  # harbor:PATH, a Harbor task folder or a folder of them
        return harbor.load(Path(str(path).removeprefix(harbor.PREFIX)).expanduser(), split)
    if (ref := hub.parse(path)) is not None:
        subset, variant = gaia2.phase(subset)  # mini_noise: Gaia2's mini config in its noise phase
        folder, sha = hub.fetch(ref, split, subset)
        return gaia2.in_phase(replace(_load_local(_subset(folder, subset, str(ref)), split), revision=sha), variant)
    root = Path(path).expanduser()
    subset, variant = (subset, None) if subset is None or (root / subset).is_dir() else gaia2.phase(subset)
    return gaia2.in_phase(_load_local(_subset(root, subset, str(path)), split), variant)


def _subset(root: Path, subset: str | None, shown: str) -> Path:
    """The folder of `subset` under `root` (`root` itself without one); InputError naming the folders there."""
    if subset is None:
        return root
    if (root / subset).is_dir():
        return root / subset
    there = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    raise InputError(f"--subset {subset}: the dataset {shown} has no folder {subset!r} (its folders: "
                     f"{', '.join(there) or 'none'}; a Hub cache holds only the subsets downloaded before)")


def _load_local(path: Path, split: str | None) -> Dataset:
    path = path.expanduser()
    for adapter in ADAPTERS:
        if (found := adapter.detect(path)) is not None:
            with collector_paused():  # harness/bulk.py
                return adapter.load(found, split)
    if not path.exists():
        raise InputError(f"dataset path {path} does not exist")
    raise InputError(f"dataset path {path} is neither a file nor a folder")
