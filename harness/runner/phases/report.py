"""Phase 7, the report: built from the rows (or the directory's own, when nothing ran and nothing it
rests on changed), written under the lock with the summary CSV's line (`report_run`); then shown: the
report's table, the ids that did not end well, the run directory and the commands that open it
(report/output.py), why the run stopped or failed, and the exit code (`conclude`, harness/exit_codes.py)."""

from __future__ import annotations

import json

from rich.console import Console

from harness import exit_codes
from harness.bulk import collector_paused
from harness.config import RunConfiguration
from harness.datasets import hub
from harness.report import Report, append_summary, build_report, render, write_report
from harness.report.output import end_lines
from harness.results.layout import RunDir
from harness.results.store import read_rows
from harness.runner.outcome import Outcome
from harness.runner.phases.preflight import Checked
from harness.runner.phases.record import Recorded
from harness.terminal import say


def report_run(cfg: RunConfiguration, checked: Checked, recorded: Recorded, layout: RunDir, *, leaked: int,
               ran: bool, elapsed: float, console: Console) -> Report | None:
    """The run's report, written; None when the directory refused it (said: every row is there, exit 4).
    `ran`: instances ran (else the report may stand); `elapsed`: this run's wall time."""
    selected, output_dir = checked.prepared.selected, cfg.output.dir
    report = None if ran or leaked else _unchanged_report(layout, recorded.basis)
    if report is None:
        wall = elapsed  # (an unchanged report keeps its own: it is not read twice)
        if (previous_wall := _previous_wall_time(layout)) is not None:  # a resume adds its time; one with
            wall = previous_wall + wall if ran else previous_wall  # nothing to run keeps the total
        with collector_paused():  # every row read in full: as many objects as at loading
            report = build_report(read_rows(layout.output), [i.instance_id for i in selected], leaked_containers=leaked,
                                  wall_time_s=wall, levels={i.instance_id: i.level for i in selected},
                                  epochs=cfg.epochs.count, reducers=list(cfg.epochs.reducers),
                                  normalize=getattr(checked.prepared.scorers[0], "normalize", None),
                                  tasks=recorded.tasks, run_dir=layout.root, priced=cfg.model.cost_known())
        report.basis = recorded.basis
        try:
            write_report(report, output_dir)
        except OSError as exc:  # a full disk after the last row: the rows are all there (exit 4)
            say(console, f"error: cannot write the report {layout.report}: {exc}; every finished row is in "
                         f"{layout.output}: run again with --output-dir {layout.root} once the disk takes files "
                         "(it writes the report)", style="red")
            return None
    try:
        append_summary(report, cfg.output.summary_csv or output_dir.parent / "summary.csv",
                       run_label=output_dir.name, output_dir=output_dir,
                       extra={"model": cfg.model_flag, "agent": cfg.agent, "dataset": hub.shown(cfg.dataset.path)})
    except OSError as exc:
        say(console, f"warning: cannot update the summary CSV: {exc}", style="yellow")
    return report


def conclude(report: Report, outcome: Outcome, cfg: RunConfiguration, console: Console) -> int:
    """Show the report and how the run ended; its exit code."""
    stdout = Console()
    stdout.print(render(report))
    for line in end_lines(report, cfg.output.dir):  # what did not end well, where the run is, how to open it
        say(stdout, line)
    if outcome.stopped:
        say(console, outcome.stopped, style="yellow")
    if outcome.over_budget:  # exit 3, naming the budget
        say(console, f"{outcome.over_budget}: instances it stopped are limit rows (max_cost)", style="red")
    if (unjudged := report.missing_verdicts()) is not None:  # a scorer failed: exit 3, said in one line
        say(console, unjudged, style="red")
    diverged = replay_failure(report) if cfg.replay.fail_on_divergence else None
    if diverged is not None:
        say(console, diverged, style="red")
    if outcome.input_error:  # exit 2: an instance met a problem of the run's configuration
        say(console, f"error: {outcome.input_error}", style="red")
        return exit_codes.INPUT
    code = exit_code(report)
    if code == exit_codes.OK and outcome.over_budget:
        return exit_codes.INSTANCE_ERRORS
    return exit_codes.DIVERGED if code == exit_codes.OK and diverged is not None else code


def _unchanged_report(layout: RunDir, basis: str) -> Report | None:
    """The directory's report when nothing ran and nothing it rests on changed (a resume with nothing
    to do then reads no row in full); else None."""
    try:
        if layout.report.stat().st_mtime_ns < layout.output.stat().st_mtime_ns:
            return None
        report = Report.model_validate_json(layout.report.read_bytes())
    except (OSError, ValueError):
        return None
    return report if report.basis == basis else None


def _previous_wall_time(layout: RunDir) -> float | None:
    """The wall time an earlier run into this directory reported (None: no readable report)."""
    try:
        value = json.loads(layout.report.read_text(encoding="utf-8")).get("wall_time_s")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def replay_failure(report: Report) -> str | None:
    """Why --fail-on-divergence fails the run (one line), or None: every replayed tool result matched."""
    replay = report.replay
    if replay is None or not (replay.divergences or replay.not_checked):
        return None
    parts = []
    if replay.divergences:
        parts.append(f"{replay.divergences} tool result(s) differ from the recording in "
                     f"{', '.join(list(replay.diverged)[:10])} (`divergence` events in their traces)")
    if replay.not_checked:
        parts.append(f"{replay.not_checked} tool result(s) could not be checked: the recording has no "
                     "fingerprint for them (re-record it with --record)")
    return "--fail-on-divergence: " + "; ".join(parts)


def exit_code(report: Report) -> int:
    """How the report says the run ended: leaked containers fail it; errored, missing or unjudged instances
    are instance errors."""
    if report.leaked_containers:
        return exit_codes.FAILED
    if report.n_errors or report.n_missing or report.missing_verdicts() is not None:
        return exit_codes.INSTANCE_ERRORS
    return exit_codes.OK
