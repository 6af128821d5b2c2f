"""How a run's evaluation loop ended (runner/evaluate.py), in a module of its own: a run with nothing
to do makes one without importing the loop."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.results.model import ResultRow


@dataclass
class Outcome:
    """How the evaluation loop ended."""

    write_error: OSError | None = None  # output.jsonl refused a row
    held: list[ResultRow] = field(default_factory=list)  # rows it did not take
    stopped: str | None = None  # why no more instances were started
    disk_full: Exception | None = None  # the run directory refused the harness's own files (not a row)
    over_budget: str | None = None  # --max-cost was reached (exit 3): what was spent, of what budget
    input_error: str | None = None  # an instance met a problem of the run's configuration (exit 2): which

    @property
    def refused(self) -> Exception | None:
        """Why the run directory stopped taking files mid-run (exit 4: `rescue_rows`), else None."""
        return self.write_error or self.disk_full
