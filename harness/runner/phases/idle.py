"""Phase 0, a look at the run directory: is there anything to run at all?

A directory with a run.json of this dataset, whose output.jsonl holds a finished row for every selected
instance and epoch (nothing torn, damaged or rescued to put right), is a run with nothing to do: a
resume that only re-reports. Such a run needs neither the engine nor a model, so it skips the model
probes, the provider's preflight and capacity, the tool families' checks, the orphan reap and the leak
audit (it starts no sandbox), and it answers with Docker stopped. Its run.json still carries the image
the provider names without the engine (`SandboxProvider.image_ref`), so a changed image or any other
changed setting is refused exactly as before. A provider that cannot name its image offline (None)
always goes through the preflight, and so does a --web-record run: its reap keeps the archive a killed
run's proxy still holds (sandbox/docker/cleanup.py). So does a directory whose last run did not end through
its leak audit and report (`_ended_cleanly`: killed, it left its report.json older than its last row, or its
agents' request files in the scratch): the sandboxes it left are reaped by this run, whatever it selects
(a kill -9 while the last finished instances' sandboxes were still being removed left them running before).

The look is read only. When the directory holds a run.json it is taken under the output dir's lock
(held from then on: the rows cannot change between this look and the resume), and its scan of
output.jsonl is handed to the resume phase, which does not read the file again.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from harness.config import RunConfiguration
from harness.results.layout import RunDir
from harness.results.store import Loaded, RowKey, load, pending
from harness.runner.phases.preflight import Checked, new_run_id
from harness.runner.preflight import Prepared
from harness.runner.run_config import lock_output_dir, vouches
from harness.sandbox.contract import SandboxProvider


@dataclass(frozen=True)
class Looked:
    """What the look found: `idle` (the run's Checked, made without the engine) when nothing is to run;
    `scanned` (output.jsonl's rows) and `locked` (the output dir's lock is held) when it read the rows."""

    idle: Checked | None = None
    scanned: Loaded | None = None
    locked: bool = False


def look(cfg: RunConfiguration, prepared: Prepared, provider: SandboxProvider, layout: RunDir,
         held: contextlib.ExitStack) -> Looked:
    if not layout.run_json.exists():
        return Looked()  # a new run: the preflight first, then the lock (nothing is made before it passes)
    held.enter_context(lock_output_dir(cfg.output.dir))
    scanned = load(layout.output, RowKey, damaged_ok=True)
    image = provider.image_ref()
    if (image is None or cfg.sandbox.web_record or scanned.damaged or scanned.torn or layout.rescue.exists()
            or not _ended_cleanly(layout)
            or not vouches(cfg.output.dir, prepared.dataset.fingerprint)
            or pending([i.instance_id for i in prepared.selected], scanned.rows, cfg.epochs.count)[0]):
        return Looked(scanned=scanned, locked=True)
    return Looked(Checked(prepared, image, new_run_id(cfg)), scanned, locked=True)


def _ended_cleanly(layout: RunDir) -> bool:
    """The run before this one got through its leak audit to its report: report.json at least as new as
    output.jsonl, and no agent's request files left in the scratch (a run killed mid-way leaves one or both)."""
    try:
        if layout.report.stat().st_mtime_ns < layout.output.stat().st_mtime_ns:
            return False
    except FileNotFoundError:
        return False
    try:
        return not any(layout.scratch.iterdir())
    except FileNotFoundError:
        return True
