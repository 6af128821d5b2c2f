"""Datasets: load a dataset into `Instance`s, select, and fingerprint them.

One module per job: `load.py` dispatches to a format adapter (`gaia.py`, `plain.py`, `math500.py`,
`multihoprag.py`); `rows.py` turns a tabular file's rows into instances, `tabular.py` reads the
file (the only user of pandas, for CSV and parquet), `cells.py` reads one cell, `attachments.py`
checks files against the sandbox packer, `problems.py` reports every problem at once;
`fingerprint.py` hashes a dataset, `cache.py` keeps a validated one between runs.

`load_dataset` is imported lazily (PEP 562): processes that only use `Instance` (e.g. every agent
process) need none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.datasets.fingerprint import dataset_fingerprint
from harness.datasets.model import Instance

# Eager on purpose: the submodule has the same name as the function, so a lazy import would let
# any `import harness.datasets.select` rebind the package attribute `select` to the module.
from harness.datasets.select import select

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
