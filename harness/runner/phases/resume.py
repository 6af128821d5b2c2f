"""Phase 3, resume: output.jsonl put right (torn, damaged and foreign lines set aside, rows a failed run
rescued merged: results/integrity.py `settle`), the scratch emptied, the containers killed harness
processes left reaped, and what is still to run: every selected instance and epoch without a finished
row (an errored row is run again)."""

from __future__ import annotations

from rich.console import Console

from harness.config import RunConfiguration
from harness.datasets.model import Instance
from harness.results.integrity import settle
from harness.results.layout import RunDir
from harness.results.store import Loaded, pending
from harness.runner.agent_process.supervise import reset_scratch
from harness.runner.phases.preflight import Checked
from harness.runner.phases.record import Recorded
from harness.sandbox.contract import SandboxProvider
from harness.terminal import say

Todo = list[tuple[Instance, int]]  # (instance, epoch) to run, in order


def resume(cfg: RunConfiguration, checked: Checked, recorded: Recorded, layout: RunDir, provider: SandboxProvider,
           console: Console, *, scanned: Loaded | None = None, reap: bool = True) -> Todo:
    """`scanned`: output.jsonl as read under this run's lock (phases/idle.py), not read again; `reap`: remove
    the containers of killed harness processes (not for a run with nothing to do, which calls no engine)."""
    selected, epochs, force = checked.prepared.selected, cfg.epochs.count, cfg.output.force
    # What resuming needs of each row (the full rows only for a new report), once output.jsonl is put right.
    scanned, notes = settle(layout.output, checked.prepared.dataset.instances, vouched=recorded.vouched, force=force,
                            scanned=scanned)
    for note in notes:
        say(console, note, style="yellow")
    reset_scratch(cfg.output.dir)
    reaped = provider.cleanup() if reap else []
    if reaped:
        say(console, f"removed {len(reaped)} container(s) left by killed harness processes")
    to_run, done = pending([i.instance_id for i in selected], scanned.rows, epochs)
    if done:
        what = "instance(s)" if epochs == 1 else f"of {len(selected) * epochs} instance runs"
        say(console, f"resuming: {len(done)} {what} already finished, {len(to_run)} to run")
    by_id = {i.instance_id: i for i in selected}
    return [(by_id[i], e) for i, e in to_run]
