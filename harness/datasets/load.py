"""Load a dataset into `Instance`s, validating every row before returning anything.

Two forms are understood:

- GAIA layout: a folder holding ``metadata.jsonl`` or ``metadata.parquet`` (columns
  ``task_id``, ``Question``, ``Level``, ``Final answer``, optional ``file_name`` and
  others), attachments beside it. The dataset root with a split resolves to
  ``ROOT/2023/<split>/``. A ``metadata.*`` file given directly is read the same way.
- Plain form: a ``.jsonl``, ``.csv`` or ``.parquet`` file with columns ``instance_id``,
  ``question``, ``answer``, optional ``files`` and ``level``; attachments lie beside it. The seed's
  names ``id``, ``prompt`` and ``expected_answer`` are accepted for the first three (where the
  canonical column is absent).

Either form may carry per-task expectations: ``expected_tool_calls`` (a list of tool names; in CSV
';'-joined or a JSON list), ``max_steps`` and ``max_tokens`` (integers >= 1).
- Benchmarks with layouts of their own, detected first: MATH-500 (harness/datasets/math500.py)
  and MultiHop-RAG (harness/datasets/multihoprag.py).

Columns not mapped onto `Instance` fields go to ``metadata`` as JSON-safe values.

Attachments are checked as the sandbox packer will pack them (harness/sandbox/files.py): each
must be a readable file or folder inside the dataset folder, and one instance's files together
must pack to at most ``MAX_ARCHIVE_BYTES`` (512 MiB, the largest upload a sandbox accepts).
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any


from harness.bulk import collector_paused
from harness.datasets import cache
from harness.datasets.model import Instance
from harness.errors import InputError
from harness.fsutil import inside
from harness.sandbox import files as packer
from harness.sandbox.files import check_name

MAX_REPORTED = 20
GAIA_FILES = ("metadata.jsonl", "metadata.parquet")
ALIASES = {"id": "instance_id", "prompt": "question", "expected_answer": "answer"}  # the seed's task schema
EXPECTATIONS = ("expected_tool_calls", "max_steps", "max_tokens")
_NO_EXPECTATIONS = frozenset(EXPECTATIONS)


@dataclass(frozen=True)
class _Form:
    id: str
    question: str
    answer: str
    level: str
    files: str
    required: tuple[str, ...]

    @functools.cached_property
    def mapped(self) -> frozenset[str]:
        """The columns that become Instance fields (the rest go to metadata)."""
        return frozenset((self.id, self.question, self.answer, self.level, self.files, *EXPECTATIONS))


GAIA = _Form("task_id", "Question", "Final answer", "Level", "file_name",
             required=("task_id", "Question", "Final answer", "Level"))
PLAIN = _Form("instance_id", "question", "answer", "level", "files",
              required=("instance_id", "question", "answer"))


def load_dataset(path: str | Path, split: str | None = None) -> list[Instance]:
    """All instances of the dataset at `path`; raises InputError listing every problem found."""
    benchmark = _benchmark(Path(path).expanduser(), split)
    if benchmark is not None:
        return benchmark
    file, form = _resolve(Path(path).expanduser(), split)
    with collector_paused():  # harness/bulk.py
        return _load(file, form, split)


def _load(file: Path, form: _Form, split: str | None) -> list[Instance]:
    cached = cache.get(file, split)
    if cached is not None:
        return cached
    problems: list[str] = []
    records, labels, header = _read(file, problems)
    if not records:  # nothing to run (a header alone has its columns: none is missing)
        raise_problems(file, problems or ["no rows" + (f" (only a header: {', '.join(header)})" if header else "")])
    columns = set(header).union(*records)
    if form is PLAIN:
        renames = {a: c for a, c in ALIASES.items() if a in columns and c not in columns}
        if renames:
            records = [{renames.get(k, k): v for k, v in r.items()} for r in records]
            columns = {renames.get(c, c) for c in columns}
    missing = [c for c in form.required if c not in columns]
    if missing:
        problems.append(f"missing required column(s) {', '.join(map(repr, missing))}")
        raise_problems(file, problems)
    instances: list[Instance] = []
    seen: dict[str, str] = {}
    root = file.parent.resolve()
    checks = _Checks(root)
    for label, record in zip(labels, records):
        instance = _instance(record, form, checks, label, seen, problems, csv=file.suffix == ".csv")
        if instance is not None:
            instances.append(instance)
    if problems:
        raise_problems(file, problems)
    return cache.put(file, split, instances)


def _benchmark(path: Path, split: str | None) -> list[Instance] | None:
    """A benchmark with a layout of its own (MATH-500, MultiHop-RAG: see their modules), or None."""
    from harness.datasets import math500, multihoprag

    for adapter in (math500, multihoprag):
        if path.exists() and (file := adapter.detect(path)) is not None:
            if split is not None:
                raise InputError(f"--split {split!r} applies to a GAIA dataset folder, not to {file}")
            return adapter.load(file)
    return None


def raise_problems(where: str | Path, problems: list[str]) -> None:
    """One InputError listing the first MAX_REPORTED problems of dataset `where` (every loader's)."""
    shown = [f"  - {p}" for p in problems[:MAX_REPORTED]]
    if len(problems) > MAX_REPORTED:
        shown.append(f"  ... and {len(problems) - MAX_REPORTED} more")
    raise InputError(f"dataset {where}: {len(problems)} problem(s):\n" + "\n".join(shown))


def _metadata_in(folder: Path) -> Path | None:
    return next((folder / n for n in GAIA_FILES if (folder / n).is_file()), None)


def _resolve(path: Path, split: str | None) -> tuple[Path, _Form]:
    """The file to read and its form, from a file, a split folder or a GAIA root (+ split)."""
    if not path.exists():
        raise InputError(f"dataset path {path} does not exist")
    if path.is_file():
        if path.name in GAIA_FILES:
            if split is not None and path.parent.name != split:
                raise InputError(f"dataset file {path} is not in split folder {split!r}")
            return path, GAIA
        if split is not None:
            raise InputError(f"--split {split!r} applies to a GAIA dataset folder, not to file {path}")
        if path.suffix.lower() not in (".jsonl", ".csv", ".parquet"):
            raise InputError(f"dataset file {path}: unknown extension {path.suffix or '(none)'!r} "
                             "(expected .jsonl, .csv or .parquet, or a GAIA folder)")
        return path, PLAIN
    direct = _metadata_in(path)
    if direct is not None:
        if split is not None and path.name != split:
            raise InputError(f"dataset folder {path} holds split {path.name!r}, not {split!r}")
        return direct, GAIA
    found = sorted({p.parent.name for n in GAIA_FILES for p in path.glob(f"2023/*/{n}")})
    if split is not None:
        chosen = _metadata_in(path / "2023" / split)
        if chosen is None:
            raise InputError(f"dataset {path}: no split {split!r} (no metadata.jsonl/metadata.parquet "
                             f"in {path / '2023' / split}); splits found: {', '.join(found) or 'none'}")
        return chosen, GAIA
    if len(found) == 1:
        return _metadata_in(path / "2023" / found[0]), GAIA  # type: ignore[return-value]
    if not found:
        raise InputError(f"dataset folder {path} holds no metadata.jsonl/metadata.parquet "
                         "(neither directly nor under 2023/<split>/)")
    raise InputError(f"dataset {path} has several splits, choose one with --split: {', '.join(found)}")


def _read(file: Path, problems: list[str]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """The rows of `file` as dicts, a label per row ('line N' for jsonl, 'row N' otherwise) and the
    columns its header names (none for jsonl). JSON lines are read with the standard library;
    pandas (a 100 MB import) only for CSV and parquet."""
    suffix = file.suffix.lower()
    try:
        if suffix == ".jsonl":
            return (*_read_jsonl(file, problems), [])
        import pandas as pd

        try:
            if suffix == ".csv":
                frame = pd.read_csv(file, dtype=str, keep_default_na=False)
            else:
                frame = pd.read_parquet(file, dtype_backend="numpy_nullable")
        except pd.errors.ParserError as exc:
            raise ValueError(str(exc)) from exc
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"dataset file {file} could not be read: {exc}") from exc
    return (frame.astype(object).to_dict(orient="records"), [f"row {i}" for i in range(1, len(frame) + 1)],
            [str(c) for c in frame.columns])


def _read_jsonl(file: Path, problems: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    records: list[dict[str, Any]] = []
    labels: list[str] = []
    with open(file, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"line {number}: invalid JSON ({exc.msg} at column {exc.colno})")
                continue
            if not isinstance(record, dict):
                problems.append(f"line {number}: expected a JSON object, got {type(record).__name__}")
                continue
            records.append(record)
            labels.append(f"line {number}")
    return records, labels


_PLAIN = (str, int, bool)


def jsonable(value: Any) -> Any:
    """`value` with numpy/pandas types turned into plain JSON-safe Python values (missing ones, NaN
    and infinities: None). Recognised by their types' modules, so neither library is imported here."""
    kind = type(value)
    if kind in _PLAIN or value is None:
        return value
    if kind.__module__ == "numpy":  # a scalar (ndim 0) or an array
        value = value.tolist() if getattr(value, "ndim", 0) else value.item()
    elif kind.__name__ in ("NAType", "NaTType"):  # pandas' missing values
        return None
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _text(value: Any) -> str | None:
    """A cell as text; missing or blank is None."""
    value = jsonable(value)
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return text if text.strip() else None


def _level(value: Any) -> int:
    """An integer level, or ValueError."""
    value = jsonable(value)
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise ValueError


def _file_names(value: Any, csv: bool) -> list[str]:
    """The attachment names of a cell: a list, one name, ';'-joined names (CSV) or a JSON list."""
    value = jsonable(value)
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if csv and text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"files {text!r} is not a valid JSON list ({exc.msg})") from None
        elif csv:
            return [n.strip() for n in text.split(";") if n.strip()]
        else:
            return [text] if text else []
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValueError(f"files must be a list of names or a single name, got {value!r}")
    return [n for n in value if n.strip()]


def _entry_problem(root: Path, path: Path, shown: str) -> str | None:
    """What stops the sandbox packer from storing `path`, as `build_archive` judges it, or None."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # e.g. a symlink loop
        return f"{shown} at {path} cannot be resolved ({exc})"
    if not inside(root, real):
        return f"{shown} points outside the dataset folder (to {real})"
    if real.is_dir():
        mode = os.R_OK | os.X_OK
    elif real.is_file():
        mode = os.R_OK
    else:
        return f"{shown} at {path} is not a regular file or folder"
    if not os.access(path, mode):
        return f"{shown} at {path} is not readable"
    return None


def _attachment_problems(root: Path, name: str) -> list[str]:
    """Every problem with attachment `name`, walking folders with the sandbox packer's rules."""
    target = root / name
    if not target.exists():
        return [f"attachment {name!r} not found at {target}"]
    if (problem := _entry_problem(root, target, f"attachment {name!r}")) is not None:
        return [problem]
    if not target.is_dir():
        return []
    problems: list[str] = []
    try:
        entries = sorted(target.rglob("*"))
    except OSError as exc:
        return [f"attachment {name!r} at {target} cannot be listed ({exc})"]
    for path in entries:
        inner = f"{name}/{path.relative_to(target).as_posix()}"
        if (problem := _entry_problem(root, path, f"attachment {name!r}: {inner!r}")) is not None:
            problems.append(problem)
    return problems


def _human(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _size_problem(root: Path, names: list[str]) -> str | None:
    """What is wrong with the size of an instance's files, packed as the sandbox packer packs
    them (an archive over packer.MAX_ARCHIVE_BYTES cannot be sent into a sandbox), or None."""
    stored, sizes = 0, {}
    try:
        for member in packer.members(root, names):
            stored += packer.stored_size(member)
            sizes[member.name] = sizes.get(member.name, 0) + member.size
    except (InputError, OSError) as exc:
        return f"attachments cannot be measured ({exc})"
    total, limit = packer.packed_size(stored), packer.MAX_ARCHIVE_BYTES
    if total <= limit:
        return None
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:3]
    shown = ", ".join(f"{name!r} ({_human(size)})" for name, size in largest)
    return (f"attachments pack to {total} bytes, over the limit of {limit} bytes ({_human(limit)}) "
            f"per instance; largest: {shown}")


class _Checks:
    """The attachment checks of one load, each done once per unique file or file set: datasets
    often share one attachment among thousands of rows (a corpus, a database)."""

    def __init__(self, root: Path):
        self.root = root
        self._problems: dict[str, list[str]] = {}
        self._sizes: dict[tuple[str, ...], str | None] = {}
        self._names: dict[str, tuple[str, str | None]] = {}

    def name(self, raw: str) -> tuple[str, str | None]:
        """(the checked name, None) or (raw, the problem with it)."""
        if raw not in self._names:
            try:
                self._names[raw] = (check_name(raw), None)
            except InputError as exc:
                self._names[raw] = (raw, str(exc))
        return self._names[raw]

    def attachment(self, name: str) -> list[str]:
        if name not in self._problems:
            self._problems[name] = _attachment_problems(self.root, name)
        return self._problems[name]

    def size(self, names: list[str]) -> str | None:
        key = tuple(names)
        if key not in self._sizes:
            self._sizes[key] = _size_problem(self.root, names)
        return self._sizes[key]


def _instance(record: dict[str, Any], form: _Form, checks: _Checks, label: str, seen: dict[str, str],
              problems: list[str], *, csv: bool) -> Instance | None:
    root = checks.root
    before = len(problems)
    instance_id = _text(record.get(form.id))
    where = f"{label} (id {instance_id!r})" if instance_id else label
    if instance_id is None:
        problems.append(f"{label}: empty {form.id!r}")
    elif instance_id in seen:
        problems.append(f"{label}: duplicate id {instance_id!r} (first at {seen[instance_id]})")
    else:
        seen[instance_id] = label
    question = _text(record.get(form.question))
    if question is None:
        problems.append(f"{where}: empty {form.question!r}")
    level = None
    if _text(raw := jsonable(record.get(form.level))) is not None:
        try:
            level = _level(raw)
        except ValueError:
            problems.append(f"{where}: {form.level!r} {raw!r} is not an integer")
    files: list[str] = []
    try:
        raw_names = _file_names(record.get(form.files), csv)
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        raw_names = []
    for raw_name in raw_names:
        name, problem = checks.name(raw_name)
        if problem is not None:
            problems.append(f"{where}: {problem}")
            continue
        problems.extend(f"{where}: {problem}" for problem in checks.attachment(name))
        files.append(name)
    if files and len(problems) == before and (problem := checks.size(files)) is not None:
        problems.append(f"{where}: {problem}")
    expectations = _expectations(record, where, problems, csv) if not _NO_EXPECTATIONS.isdisjoint(record) else {}
    if len(problems) > before:
        return None
    answer = _text(record.get(form.answer)) if csv else jsonable(record.get(form.answer))
    if answer is not None and not isinstance(answer, str):
        answer = json.dumps(answer) if isinstance(answer, (dict, list)) else str(answer)
    mapped = form.mapped
    return Instance(
        instance_id=instance_id, question=question,
        answer=answer,
        files=files, root=root, level=level,
        metadata={str(k): jsonable(v) for k, v in record.items() if k not in mapped},
        **expectations,
    )


def _expectations(record: dict[str, Any], where: str, problems: list[str], csv: bool) -> dict[str, Any]:
    """The row's per-task expectations that are set; a bad one is a problem naming the row."""
    out: dict[str, Any] = {}
    tools = jsonable(record.get("expected_tool_calls"))
    if _text(tools) is not None or isinstance(tools, list):
        try:
            out["expected_tool_calls"] = _file_names(tools, csv)
        except ValueError:
            problems.append(f"{where}: 'expected_tool_calls' must be a list of tool names, got {tools!r}")
    for name in ("max_steps", "max_tokens"):
        raw = jsonable(record.get(name))
        if _text(raw) is None:
            continue
        try:
            value = _level(raw)
            if value < 1:
                raise ValueError
            out[name] = value
        except ValueError:
            problems.append(f"{where}: {name!r} {raw!r} is not an integer >= 1")
    return out
