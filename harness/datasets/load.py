"""Load a dataset into `Instance`s: the first format adapter that recognises the path reads it.

An adapter is a module with ``detect(path) -> Path | None`` (what it would read at `path`, or None
when the path is not in its format) and ``load(found, split) -> list[Instance]`` (every row
validated before anything is returned; InputError listing every problem: harness/datasets/
problems.py). Each benchmark declares its own (harness/benchmark.py `Benchmark.adapters`); they are
asked in the benchmarks' `order`, the specific layouts before the general ones (GAIA's: any folder; a
dataset of one's own: any other file). ``NAME:PATH`` names a benchmark's dataset outright (its `prefix`).

``--subset C`` reads the folder ``C/`` of the dataset (a Hub config laid out one folder per config; a local
copy of such a repository too); a benchmark whose configs run in phases (`Benchmark.phases`) may read a
subset that is no folder as a config in a phase. A Hub reference, ``hf://OWNER/NAME[@REVISION]`` (hub.py),
is downloaded first (with a subset, that folder alone) and its local folder read by the same adapters,
and the `Dataset` (model.py) carries the commit sha as its `revision`. Tabular files are cached between
runs (rows.py, cache.py); reading CSV and parquet is the only use of pandas (tabular.py).
"""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from harness.bulk import collector_paused
from harness.benchmark import Adapter, registered
from harness.datasets import hub
from harness.datasets.model import Dataset
from harness.errors import InputError


def adapters() -> list[Adapter]:
    """Every benchmark's dataset adapters, in the benchmarks' order."""
    return [adapter for benchmark in registered() for adapter in benchmark.adapters]


def _prefixed(path: str | Path) -> tuple[Adapter, Path] | None:
    """(the adapter, the path) of a ``NAME:PATH`` naming a benchmark's dataset outright, else None."""
    for benchmark in registered():
        if benchmark.prefix and str(path).startswith(f"{benchmark.prefix}:") and benchmark.adapters:
            return benchmark.adapters[0], Path(str(path).removeprefix(f"{benchmark.prefix}:")).expanduser()
    return None


def _phase(subset: str | None) -> tuple[str | None, Callable[[Dataset], Dataset]]:
    """(the folder of `subset`, what puts the dataset in the phase it names) from the first benchmark that reads
    it as a config in a phase; (subset, as it is) otherwise."""
    for benchmark in registered():
        if benchmark.phases is not None and (found := benchmark.phases.phase(subset))[1] is not None:
            phases, (folder, phase) = benchmark.phases, found
            return folder, lambda dataset: phases.in_phase(dataset, phase)
    return subset, lambda dataset: dataset


def load_dataset(path: str | Path, split: str | None = None, subset: str | None = None) -> Dataset:
    """The dataset at `path` (a Hub reference too), its `subset` folder when one is named: every instance
    and their fingerprint; raises InputError listing every problem found."""
    if subset is not None and (not subset.strip() or any(c in subset for c in "/\\*?[") or subset in (".", "..")):
        raise InputError(f"--subset {subset!r}: a subset is the name of one folder of the dataset (a config)")
    if (prefixed := _prefixed(path)) is not None:
        adapter, found = prefixed
        return adapter.load(found, split)
    if (ref := hub.parse(path)) is not None:
        subset, in_phase = _phase(subset)
        folder, sha = hub.fetch(ref, split, subset)
        return in_phase(replace(_load_local(_subset(folder, subset, str(ref)), split), revision=sha))
    root = Path(path).expanduser()
    subset, in_phase = (subset, lambda d: d) if subset is None or (root / subset).is_dir() else _phase(subset)
    return in_phase(_load_local(_subset(root, subset, str(path)), split))


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
    try:
        for adapter in adapters():
            if (found := adapter.detect(path)) is not None:
                with collector_paused():  # harness/bulk.py
                    return adapter.load(found, split)
    except RecursionError:  # JSON nested past what Python parses, in an adapter that does not name its file
        raise InputError(f"dataset {path}: holds JSON nested too deep to read") from None
    if not path.exists():
        raise InputError(f"dataset path {path} does not exist")
    raise InputError(f"dataset path {path} is neither a file nor a folder")
