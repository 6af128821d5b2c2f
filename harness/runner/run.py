"""`harness run`: validate everything, then evaluate the selected instances in parallel.

All checks that can fail for every instance happen before any container starts: the
dataset, selection, config, agent, replay coverage, the output dir (it must take files),
one preflight call to each model the run uses (models/probe.py), one search to its hosted
search provider (environments/websearch/probe.py), the sandboxes'
resources against the engine's capacity, and every MCP server started (a stdio one in one
sandbox) and its tools listed (environments/mcp_preflight.py). Results are appended one row per instance to
DIR/output.jsonl; a re-run into the same DIR resumes (rows rescued by a failed run are
merged first, finished rows are kept, errored ones are retried) unless the configuration
changed.

Rules for stopping early: once output.jsonl refuses a row, or the run directory's disk
refuses an instance's files (it is full), or once --fail-on-error's number of errored
instances is reached, no new instance starts; running ones finish and their rows are kept
(in output.jsonl, or rescued beside it). A run directory that stopped taking files mid-run
(rows, an instance's files, the report) ends the run with exit 4, saying where the rows are. Ctrl-C, SIGTERM and SIGHUP
kill the agents and remove the run's sandboxes (harness/signals.py). The exit code
(harness/exit_codes.py) says how the run ended: 0 only when every selected instance
ended without an error.

The run is a sequence of named phases, each a module of runner/phases/ with typed inputs and
outputs: preflight, lock and run.json, resume, web services, workers, audit, report. A run with nothing
to do (every selected instance finished) is told before the preflight's engine and model checks and skips
them (phases/idle.py): it only re-reports. This module
calls them in order; the checks themselves live in preflight.py, the worker loop and the rescue
of refused rows in evaluate.py.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from rich.console import Console

from harness import exit_codes
from harness.bulk import collector_paused
from harness.config import RunConfiguration
from harness.errors import HarnessError
from harness.results.layout import RunDir
from harness.runner.agent_process.servers import ForkServers
from harness.runner.outcome import Outcome
from harness.runner.phases.audit import leak_audit
from harness.runner.phases.idle import look
from harness.runner.phases.preflight import Checked, preflight, validate
from harness.runner.phases.record import record
from harness.runner.phases.report import conclude, report_run
from harness.runner.phases.resume import Todo, resume
from harness.runner.run_config import lock_output_dir
from harness.sandbox.contract import SandboxProvider
from harness.sandbox.registry import get_provider
from harness.terminal import say, stderr_console


def run(cfg: RunConfiguration, console: Console | None = None) -> int:
    """Evaluate; return the exit code (harness/exit_codes.py). Input problems raise InputError."""
    provider = get_provider(cfg.sandbox.provider)
    # The agents' fork server: forked now, before the dataset is read, so it loads on another core
    # while this process prepares (agent_process/servers.py); ended once the instances are (or on any exit).
    forks = ForkServers()
    forks.start(cfg.agent, cfg.sandbox.provider)
    try:
        with collector_paused() as loaded:  # harness/bulk.py
            return _run(cfg, provider, console or stderr_console(), loaded, forks)
    finally:
        forks.close()


def _run(cfg: RunConfiguration, provider: SandboxProvider, console: Console, loaded: Callable[[], None],
         forks: ForkServers) -> int:
    prepared = validate(cfg, console)
    cfg = prepared.config or cfg  # with the dataset's defaults (Gaia2's epochs)
    layout = RunDir(cfg.output.dir)
    with contextlib.ExitStack() as held:
        looked = look(cfg, prepared, provider, layout, held)  # nothing to run: no engine, no model
        checked = looked.idle or preflight(cfg, provider, console, prepared)  # nothing is written before it passes
        if not looked.locked:
            held.enter_context(lock_output_dir(cfg.output.dir))
        recorded = record(cfg, checked, layout)  # run.json
        todo = resume(cfg, checked, recorded, layout, provider, console, scanned=looked.scanned,
                      reap=looked.idle is None)
        if todo and looked.idle is not None:
            raise HarnessError(f"{layout.output} changed under the output dir's lock: run again")
        loaded()  # the dataset and the rows' index are made: collect again, skipping them
        started = time.monotonic()
        outcome = _work(cfg, provider, checked, layout, console, forks, todo) if todo else Outcome()
        leaked = leak_audit(provider, checked.run_id, console) if todo else 0  # no sandbox started: none left
        if outcome.refused is not None:
            from harness.runner.evaluate import rescue_rows

            return rescue_rows(layout, outcome, leaked, console)
        report = report_run(cfg, checked, recorded, layout, leaked=leaked, ran=bool(todo),
                            elapsed=time.monotonic() - started, console=console)
        if report is None:
            return exit_codes.ROWS_NOT_WRITTEN
    return conclude(report, outcome, cfg, console)


def _work(cfg: RunConfiguration, provider: SandboxProvider, checked: Checked, layout: RunDir, console: Console,
          forks: ForkServers, todo: Todo) -> Outcome:
    """The phases a run with instances to run goes through (imported here: a resume with nothing to
    do loads neither the loop nor the web services, nor makes the sandboxes' network)."""
    from harness.runner.phases.services import web_services
    from harness.runner.phases.workers import work

    provider.prepare(network=cfg.sandbox.network, log=lambda m: say(console, m))
    with web_services(cfg, provider, checked, layout, console) as services:
        return work(cfg, provider, checked, services, todo, layout, console, forks)
