"""The harness CLI with its output directory's disk filled at one chosen write (tests/faults/test_own_files.py).

    python -m tests.faults.full_disk STAGE INSTANCE FILLER MARK ARGS...

runs `harness ARGS` in this process (as `python -m harness` does) after wrapping the one function that
makes STAGE's write for INSTANCE: just before that write, the real disk (a small tmpfs; FILLER a new
file on it) is filled to its last byte, so the write fails as a full disk fails it (ENOSPC), there and
not at a moment a timer picked. MARK (a file off that disk) then holds the stage: the test checks the
disk filled where it meant. Every later write of the run meets the same full disk.

Stages, in the order an instance makes them:
- `request`: the agent's request file (harness/runner/agent_process/supervise.py);
- `trace`: the agent's trace, at its first tool result (in the agent's process: a fork of the fork
  server, itself a fork of this process, so it inherits the wrapper);
- `verdict`: the verdict the harness appends to the ended agent's trace (harness/runner/appends.py);
- `row`: the instance's row in output.jsonl (harness/results/store.py);
- `report`: the run's report.json, once every row is in (INSTANCE is then not looked at).
"""

from __future__ import annotations

import contextlib
import runpy
import sys
from pathlib import Path

STAGES = ("request", "trace", "verdict", "row", "report")


def fill(filler: Path) -> Path:
    """Write `filler` until its disk refuses more (ENOSPC), down to the last page's last bytes."""
    with open(filler, "ab", buffering=0) as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 65536)
    with open(filler, "ab", buffering=0) as fh:
        with contextlib.suppress(OSError):
            while fh.write(b"\0"):
                pass
    return filler


def _wrap(stage: str, instance_id: str, filler: Path, mark: Path) -> None:
    def full_now() -> None:
        if not mark.exists():  # once, in whichever process gets there (the harness or an agent)
            fill(filler)
            mark.write_text(stage)

    if stage == "request":
        from harness.runner import instance

        run_agent = instance.run_agent

        def request_then(request, *args, **kwargs):
            if request.instance.instance_id == instance_id:
                full_now()
            return run_agent(request, *args, **kwargs)

        instance.run_agent = request_then
    elif stage == "trace":
        from harness.traces.events import ToolResult, Tracer

        emit = Tracer.emit

        def trace_then(self, event):
            if isinstance(event, ToolResult) and self.path is not None and \
                    Path(self.path).name.startswith(f"{instance_id}-"):
                full_now()
            return emit(self, event)

        Tracer.emit = trace_then  # type: ignore[method-assign]
    elif stage == "verdict":
        from harness.runner import instance

        append_verdict = instance.append_verdict

        def verdict_then(trace_path, row, source):
            if row.instance_id == instance_id:
                full_now()
            return append_verdict(trace_path, row, source)

        instance.append_verdict = verdict_then
    elif stage == "row":
        from harness.results import store

        append_row = store.append_row

        def row_then(path, row):
            if Path(path).name == "output.jsonl" and row.instance_id == instance_id:
                full_now()
            return append_row(path, row)

        store.append_row = row_then
    elif stage == "report":
        from harness.runner.phases import report

        write_report = report.write_report

        def report_then(*args, **kwargs):
            full_now()
            return write_report(*args, **kwargs)

        report.write_report = report_then
    else:
        raise SystemExit(f"unknown stage {stage!r}: one of {', '.join(STAGES)}")


if __name__ == "__main__":
    stage, target, filler_path, mark_path, *cli_args = sys.argv[1:]
    _wrap(stage, target, Path(filler_path), Path(mark_path))
    sys.argv = ["harness", *cli_args]
    runpy.run_module("harness", run_name="__main__")
