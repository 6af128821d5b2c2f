"""A validated dataset kept between runs, so resuming a large run does not validate it again.

Validating 100,000 rows (types, attachments, sizes) takes seconds; a resume, a re-score or a
second shard reads the same file again. An entry holds the instances a file gave, the stats
(size, modification time, inode) of that file and of every attachment they name, the version
of the loader, and the dataset's fingerprint. It is used only when all of these still match;
anything else loads afresh and replaces the entry. Entries live in HARNESS_STATE_DIR/datasets/,
one per dataset file, written atomically; an unreadable entry is ignored. Only GAIA-layout and
plain files are cached (the benchmarks' own layouts are small).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

from harness.datasets.fingerprint import dataset_fingerprint
from harness.datasets.model import Dataset, Instance
from harness.settings import state_dir


def _version() -> str:
    """The loader's version: a hash of every module of this package (any change loads afresh)."""
    here = Path(__file__).parent  # and the dataset adapters that cache (every benchmark's, whichever reads rows)
    sources = sorted(here.glob("*.py")) + sorted(here.parent.glob("benchmarks/*/dataset.py"))
    return hashlib.sha256(b"".join(p.name.encode() + b"\0" + p.read_bytes() for p in sources)).hexdigest()[:16]


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def _entry(file: Path) -> Path:
    return state_dir() / "datasets" / (hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:24] + ".pickle")


def _tree(path: Path) -> tuple | None:
    """A file's stat; for a folder, that of every file inside (a nested edit changes no folder's)."""
    if not path.is_dir():
        return _stat(path)
    return tuple((str(p.relative_to(path)), _stat(p)) for p in sorted(path.rglob("*")) if p.is_file())


def _attachments(instances: list[Instance]) -> dict[str, tuple | None]:
    pairs = {(inst.root, name) for inst in instances for name in inst.files}  # a shared file once
    names = {str(root / name) for root, name in pairs}
    return {name: _tree(Path(name)) for name in sorted(names)}


_ORDER = tuple(Instance.model_fields)  # the order validation fills the fields in
# Every field but the root (kept once per folder: its index ends each row), read off the model, so a field added
# to Instance is cached with the others (a hand-kept list missed two, and the cache then broke every resume)
FIELDS = tuple(name for name in _ORDER if name != "root")
_ROOT_AT = _ORDER.index("root")


def get(file: Path, split: str | None) -> Dataset | None:
    """The cached instances of `file` when nothing they rest on changed; else None."""
    try:
        with open(_entry(file), "rb") as fh:
            entry = pickle.load(fh)
    except Exception:  # noqa: BLE001 - missing or unreadable: load afresh
        return None
    if not isinstance(entry, dict) or entry.get("version") != _version() or entry.get("split") != split \
            or not entry.get("fingerprint"):
        return None
    if entry.get("file") != _stat(file) or entry["attachments"] != {n: _tree(Path(n)) for n in entry["attachments"]}:
        return None
    roots = [Path(r) for r in entry["roots"]]
    return Dataset([_restored(row[:_ROOT_AT] + (roots[row[-1]],) + row[_ROOT_AT:-1]) for row in entry["rows"]],
                   entry["fingerprint"])


def _restored(values: tuple) -> Instance:
    """The Instance of these values (every field, in `Instance`'s order: FIELDS with the root after
    `files`), set as pickle restores a model (pydantic's __setstate__): not validated again, `put` wrote
    them from validated instances (100,000 validations cost a resume ~0.4 s). Every field counts as
    given, as it did then."""
    instance = Instance.__new__(Instance)
    _set(instance, "__dict__", dict(zip(_ORDER, values, strict=True)))
    _set(instance, "__pydantic_fields_set__", _GIVEN.copy())
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


_set = object.__setattr__
_GIVEN = set(_ORDER)


def put(file: Path, split: str | None, instances: list[Instance]) -> Dataset:
    """Remember `file`'s instances (with their fingerprint); return them as a Dataset."""
    found = Dataset(instances, dataset_fingerprint(instances))
    roots: dict[Path, int] = {}
    rows = [tuple(getattr(inst, name) for name in FIELDS) + (roots.setdefault(inst.root, len(roots)),)
            for inst in instances]  # plain values, not pickled models: faster to read back
    entry = {"version": _version(), "split": split, "file": _stat(file), "attachments": _attachments(instances),
             "roots": [str(r) for r in roots], "rows": rows, "fingerprint": found.fingerprint}
    _write(_entry(file), entry)
    return found


def _write(path: Path, entry: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:  # streamed, and without pickle's memo of every object it wrote:
            pickler = pickle.Pickler(fh, protocol=pickle.HIGHEST_PROTOCOL)  # the entry has no cycles
            pickler.fast = True
            pickler.dump(entry)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a cache that cannot be written costs only the next load's time
