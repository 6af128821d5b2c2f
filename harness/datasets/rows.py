"""Rows of a tabular dataset into `Instance`s, through a `Form` naming its columns.

GAIA (harness/benchmarks/gaia/dataset.py) and the plain form (harness/benchmarks/custom/dataset.py) differ only in
their column names; both are read here. A row needs an id (unique in the file) and a question;
the level, when set, is an integer; the files cell names attachments (harness/datasets/
attachments.py checks them); per-task expectations (``expected_tool_calls``: tool names,
``max_steps``/``max_tokens``: integers >= 1) are optional. Columns not mapped onto `Instance`
fields go to ``metadata`` as JSON-safe values. Every row is checked before anything is
returned (harness/datasets/problems.py). A file validated before and unchanged since comes from
the cache (harness/datasets/cache.py).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.benchmark import CUSTOM
from harness.datasets import cache, cells, tabular
from harness.datasets.attachments import Checks
from harness.datasets.model import Dataset, Instance
from harness.datasets.problems import raise_problems

EXPECTATIONS = ("expected_tool_calls", "max_steps", "max_tokens")
_NO_EXPECTATIONS = frozenset(EXPECTATIONS)


@dataclass(frozen=True)
class Form:
    """The columns of one tabular form; `aliases` are accepted names for absent canonical ones."""

    id: str
    question: str
    answer: str
    level: str
    files: str
    required: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...] = ()
    benchmark: str = CUSTOM  # Instance.benchmark of its rows

    @functools.cached_property
    def mapped(self) -> frozenset[str]:
        """The columns that become Instance fields (the rest go to metadata)."""
        return frozenset((self.id, self.question, self.answer, self.level, self.files, *EXPECTATIONS))


def load(file: Path, form: Form, split: str | None) -> Dataset:
    """Every row of `file` as an Instance (cached per file and split); InputError lists every problem."""
    cached = cache.get(file, split)
    if cached is not None:
        return cached
    problems: list[str] = []
    table = tabular.read(file, problems)
    records, header = table.records, table.header
    if not records:  # nothing to run (a header alone has its columns: none is missing)
        raise_problems(file, problems or ["no rows" + (f" (only a header: {', '.join(header)})" if header else "")])
    columns = set(header).union(*records)
    renames = {a: c for a, c in form.aliases if a in columns and c not in columns}
    if renames:
        records = [{renames.get(k, k): v for k, v in r.items()} for r in records]
        columns = {renames.get(c, c) for c in columns}
    missing = [c for c in form.required if c not in columns]
    if missing:
        problems.append(f"missing required column(s) {', '.join(map(repr, missing))}")
        raise_problems(file, problems)
    instances: list[Instance] = []
    seen: dict[str, str] = {}
    checks = Checks(file.parent.resolve())
    for label, record in zip(table.labels, records, strict=True):
        found = instance(record, form, checks, label, seen, problems, csv=file.suffix == ".csv")
        if found is not None:
            instances.append(found)
    if problems:
        raise_problems(file, problems)
    return cache.put(file, split, instances)


def instance(record: dict[str, Any], form: Form, checks: Checks, label: str, seen: dict[str, str],
             problems: list[str], *, csv: bool) -> Instance | None:
    """The row as an Instance, or None with its problems appended (each naming the row)."""
    root = checks.root
    before = len(problems)
    instance_id = cells.text(record.get(form.id))
    where = f"{label} (id {instance_id!r})" if instance_id else label
    if instance_id is None:
        problems.append(f"{label}: empty {form.id!r}")
    elif instance_id in seen:
        problems.append(f"{label}: duplicate id {instance_id!r} (first at {seen[instance_id]})")
    else:
        seen[instance_id] = label
    question = cells.text(record.get(form.question))
    if question is None:
        problems.append(f"{where}: empty {form.question!r}")
    level = None
    if cells.text(raw := cells.jsonable(record.get(form.level))) is not None:
        try:
            level = cells.integer(raw)
        except ValueError:
            problems.append(f"{where}: {form.level!r} {raw!r} is not an integer")
    files: list[str] = []
    try:
        raw_names = cells.names(record.get(form.files), csv)
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
    if len(problems) > before or instance_id is None or question is None:
        return None
    answer = cells.text(record.get(form.answer)) if csv else cells.jsonable(record.get(form.answer))
    if answer is not None and not isinstance(answer, str):
        answer = json.dumps(answer) if isinstance(answer, (dict, list)) else str(answer)
    mapped = form.mapped
    return Instance(
        instance_id=instance_id, question=question,
        answer=answer,
        files=files, root=root, level=level,
        metadata={str(k): cells.jsonable(v) for k, v in record.items() if k not in mapped}, benchmark=form.benchmark,
        **expectations,
    )


def _expectations(record: dict[str, Any], where: str, problems: list[str], csv: bool) -> dict[str, Any]:
    """The row's per-task expectations that are set; a bad one is a problem naming the row."""
    out: dict[str, Any] = {}
    tools = cells.jsonable(record.get("expected_tool_calls"))
    if cells.text(tools) is not None or isinstance(tools, list):
        try:
            out["expected_tool_calls"] = cells.names(tools, csv)
        except ValueError:
            problems.append(f"{where}: 'expected_tool_calls' must be a list of tool names, got {tools!r}")
    for name in ("max_steps", "max_tokens"):
        raw = cells.jsonable(record.get(name))
        if cells.text(raw) is None:
            continue
        try:
            value = cells.integer(raw)
            if value < 1:
                raise ValueError
            out[name] = value
        except ValueError:
            problems.append(f"{where}: {name!r} {raw!r} is not an integer >= 1")
    return out
