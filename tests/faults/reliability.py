"""Figures of the fault suite: each test provokes one fault and records what became of the run.

A test calls `reliability.record(fault, outcome, lost=..., leaked=..., seconds=...)`
once per fault it provokes. `pytest tests/faults --reliability-report docs/reliability.md`
rewrites the table in that file from the records of the tests that ran (the rows of
faults that did not run this time are kept as they were). Slow faults carry
`@pytest.mark.slow` and are left out of the default run (see pyproject's addopts).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

BEGIN, END = "<!-- faults:begin -->", "<!-- faults:end -->"
HEADER = "| fault | outcome | results lost | containers leaked | seconds |\n|---|---|---|---|---|"


@dataclass
class Record:
    fault: str
    outcome: str
    lost: int
    leaked: int
    seconds: float

    def row(self) -> str:
        return f"| {self.fault} | {self.outcome} | {self.lost} | {self.leaked} | {self.seconds:.1f} |"


@dataclass
class Reliability:
    records: list[Record] = field(default_factory=list)

    def record(self, fault: str, outcome: str, *, lost: int = 0, leaked: int = 0,
               seconds: float | None = None, started: float | None = None) -> None:
        if seconds is None:
            seconds = time.monotonic() - started if started is not None else 0.0
        self.records.append(Record(fault, outcome, lost, leaked, seconds))


RELIABILITY = Reliability()


def merge(path: Path, records: list[Record]) -> None:
    """Rewrite the table between the markers in `path`: these records replace rows of the same fault."""
    text = path.read_text() if path.exists() else f"# Reliability\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    old_table, tail = rest.split(END, 1)
    rows = {}
    for line in old_table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] not in ("fault", "---") and not re.fullmatch(r"-+", cells[0]):
            rows[cells[0]] = line.strip()
    for rec in records:
        rows[rec.fault] = rec.row()
    table = "\n".join([HEADER, *(rows[k] for k in sorted(rows))])
    path.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")
