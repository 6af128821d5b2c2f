"""The evaluation loop: workers run instances, write their rows, and stop starting new ones
when output.jsonl refuses a row, when the run directory refuses the harness's own files (an
agent's request, trace or result, a verdict: OwnFileRefused; or a probe of its disk after another
harness error finds it full), or when --fail-on-error's budget is spent; rows output.jsonl
refused are rescued beside it (`rescue`); `--record` turns the traces' model calls into a
replay file.

What the terminal shows while it runs: each instance that errors or hits a limit, one line as
it ends (id, kind, the first line of the message: `instance_line`); and the progress: on a
terminal rich's bar, otherwise (nohup, CI, Slurm: stderr is a file or a pipe) a plain line
every HARNESS_PROGRESS_EVERY seconds and every 10% of the instances (`_Lines`), so a long
run's log shows it is alive, how far it got and when it should end.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from harness import exit_codes
from harness.config import RunConfiguration
from harness.fsutil import refuses_data
from harness.models.budget import RunBudget
from harness.models.replay import recorded_turns
from harness.models.slots import cap_words
from harness.report.output import NOT_PRICED
from harness.results.layout import RunDir
from harness.results.model import ResultRow
from harness.results.store import RowWriter, rescue
from harness.runner.agent_process.supervise import kill_all
from harness.runner.instance import Finished, RunSettings, run_instance
from harness.runner.outcome import Outcome
from harness.settings import settings as harness_settings
from harness.terminal import first_line, say
from harness.text import model_json
from harness.traces import LimitEvent, read_trace


def rescue_rows(layout: RunDir, outcome: Outcome, leaked: int, console: Console) -> int:
    """The run directory stopped taking files: put the rows output.jsonl refused somewhere durable
    and say where every row is (or print them)."""
    held = outcome.held
    place = rescue(layout.output, held) if held else None
    if outcome.write_error is not None:
        say(console, f"error: cannot write results to {layout.output}: {outcome.write_error}", style="red")
    else:
        say(console, f"error: {layout.root} takes no more files: {outcome.disk_full}", style="red")
    if outcome.stopped:
        say(console, outcome.stopped, style="red")
    if not held:
        say(console, f"every finished row is in {layout.output}; once its disk takes files, run again with "
                     f"--output-dir {layout.root}: it resumes (the instances that failed for want of space run "
                     "again)", style="red")
    elif place == layout.rescue:
        say(console, f"{len(held)} finished row(s) it did not take are kept in {place}; once {layout.output} "
                     f"is writable, run again with --output-dir {layout.root}: it merges them and resumes", style="red")
    elif place is not None:
        say(console, f"{len(held)} finished row(s) it did not take are kept in {place} (the run directory "
                     f"refused them too); move that file to {layout.rescue} and run again with "
                     f"--output-dir {layout.root}: it merges them and resumes", style="red")
    else:
        say(console, f"{len(held)} finished row(s) could not be saved anywhere; they follow on stdout, one JSON "
                     f"line each: append them to {layout.output}", style="red")
        sys.stdout.write("".join(model_json(row) + "\n" for row in held))
        sys.stdout.flush()
    if leaked:
        say(console, f"{leaked} container(s) of this run are left; `harness cleanup` removes them", style="red")
    return exit_codes.ROWS_NOT_WRITTEN


class _Workers:
    """What the workers share: the row writer, the counts, and whether to start more instances.

    A worker writes its instance's row itself and decides on stopping before it takes the
    next instance, so once output.jsonl refuses a row, the run directory refuses the harness's
    own files, or the errors reach --fail-on-error, no instance starts after it (those already
    running finish). After an interrupt only results (ok, limit) are kept: an error row then is
    the interrupt's doing (a killed agent), and an errored instance is run again on resume
    anyway."""

    def __init__(self, out: Path, cfg: RunConfiguration, n_selected: int, console: Console, progress,
                 spend: RunBudget | None = None):
        self.out, self.console, self.progress = out, console, progress
        self.spend = spend  # --max-cost: the run's spend, shared with the agents (models/budget.py)
        self.cost = 0.0  # of the finished instances (their agents' and judges' calls)
        self.writer = RowWriter(out)
        self.fail_on_error = cfg.execution.fail_on_error
        self.budget = self.fail_on_error.threshold(n_selected) if self.fail_on_error else None
        self.record = cfg.replay.record is not None
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.interrupted = threading.Event()
        self.why: str | None = None
        self.disk_full: Exception | None = None
        self.input_error: str | None = None
        self.done = self.correct = self.errors = self.not_started = self.unscored = 0
        self.recorded: list[dict] = []

    def run(self, instance, epoch: int, settings: RunSettings) -> None:
        if self.spend is not None and not self.stop.is_set() and self.spend.reached():
            with self.lock:  # the spend holds the running instances' cost so far
                if self.why is None:
                    self._stop(budget_words(self.spend))
        if self.stop.is_set():
            with self.lock:
                self.not_started += 1
            return
        self.finish(run_instance(instance, settings, epoch))

    def finish(self, finished: Finished) -> None:
        row = finished.row
        if self.interrupted.is_set() and row.status == "error":
            return
        if row.status != "ok":
            say(self.console, instance_line(row, self.out.parent), style="red" if row.status == "error" else "yellow")
        with self.lock:
            written = self.writer.write(row)
            self.done += 1
            self.correct += bool(row.correct)
            self.errors += row.status == "error"
            self.cost += row.usage.cost + row.judge_usage.cost
            self.unscored += row.unscored is not None  # no target: in no pass rate
            if self.record:
                self.recorded.append({"instance_id": row.instance_id, "epoch": row.epoch, "trace": row.trace})
            if not written and self.why is None:
                self._stop(f"cannot write {self.out}: {self.writer.failed}")
            elif self.why is None and (full := self._refusal(finished)) is not None:
                self.disk_full = full  # every later instance would fail the same way, for want of space
                self._stop(f"{self.out.parent} takes no more files: {full}")
            elif self.why is None and finished.stops_run:  # the run's configuration (a model's reply that cannot
                self.input_error = row.error or "an input error"  # be priced): every instance would meet it
                self._stop(first_line(self.input_error))
            elif (self.fail_on_error is not None and self.budget is not None  # a budget only with the flag
                  and self.errors >= self.budget and self.why is None):
                self._stop(f"{self.errors} instance(s) errored (--fail-on-error {self.fail_on_error.text})")
            self.progress.update(self.done, self.correct, self.errors, self.done - self.unscored, self.cost)

    def _refusal(self, finished: Finished) -> Exception | None:
        """Why the run directory takes no more files: the instance's first refusal of the harness's own
        files, or, after any other harness error, a probe of its disk; None while it still takes them."""
        if finished.refused:
            return finished.refused[0]
        return refuses_data(self.out.parent) if finished.row.error_kind == "harness" else None

    def _stop(self, why: str) -> None:
        self.why = why
        self.stop.set()
        say(self.console, f"stopping: {why}; starting no more instances, running ones finish", style="yellow")

    def outcome(self) -> Outcome:
        stopped = None
        if self.why is not None:
            stopped = f"stopped early: {self.why}; {self.not_started} instance(s) not started; re-run to resume"
        over = budget_words(self.spend) if self.spend is not None and self.spend.reached() else None
        return Outcome(write_error=self.writer.failed, held=self.writer.held, stopped=stopped,
                       disk_full=self.disk_full, over_budget=over, input_error=self.input_error)


def evaluate(todo, settings: RunSettings, out: Path, cfg: RunConfiguration, console: Console,
              n_selected: int) -> Outcome:
    """Run `todo`, a list of (instance, epoch)."""
    label = "instances" if cfg.epochs.count == 1 else "instance runs"
    shown = _Bar if console.is_terminal else _Lines
    try:
        priced = settings.model.cost_known()
        with shown(console, label, len(todo), model_caps(settings), priced) as progress:
            workers = _Workers(out, cfg, n_selected, console, progress,
                               RunBudget(settings.budget) if settings.budget else None)
            # Leaving this block waits for every sandbox removal, on success and on Ctrl-C alike.
            # Removals run in parallel well (each waits on the engine), so the pool is as wide as the run:
            # the run's end waits for the slowest removal, not for a queue of them.
            with ThreadPoolExecutor(2 * cfg.execution.workers, thread_name_prefix="reaper") as reaper, \
                    ThreadPoolExecutor(cfg.execution.workers) as pool:
                settings = replace(settings, reaper=reaper)
                futures = [pool.submit(workers.run, inst, epoch, settings) for inst, epoch in todo]
                try:
                    for future in as_completed(futures):
                        future.result()
                except KeyboardInterrupt:
                    workers.interrupted.set()
                    for future in futures:
                        future.cancel()
                    kill_all()  # running instances end now; their sandboxes are removed in finally
                    raise
    finally:
        if settings.forks is not None:  # the agents' servers end with the last agent
            settings.forks.close()
    if cfg.replay.record is not None:
        write_recording(cfg.replay.record, settings.output_dir, workers.recorded)
    return workers.outcome()


def budget_words(spend: RunBudget) -> str:
    return f"--max-cost ${spend.limit:g} reached (spent ${spend.spent():.4f})"


def instance_line(row: ResultRow, output_dir: Path) -> str:
    """One line for an instance that ended in an error or a limit: its id (and epoch), what ended
    it and the first line of why (a limit's detail is its trace's `limit` event)."""
    who = row.instance_id if row.epoch == 1 else f"{row.instance_id} #e{row.epoch}"
    if row.status == "error":
        return f"instance {first_line(who, 80)}: error ({row.error_kind}): {first_line(row.error or 'no message')}"
    detail = ""
    if row.trace:
        with contextlib.suppress(OSError, ValueError):
            details = [e.detail for e in read_trace(output_dir / row.trace) if isinstance(e, LimitEvent)]
            detail = details[-1] if details else ""
    return f"instance {first_line(who, 80)}: limit ({row.limit}){': ' + first_line(detail) if detail else ''}"


class _Bar:
    """On a terminal: rich's live bar (done/total, pass so far, errors, time left)."""

    def __init__(self, console: Console, label: str, total: int, caps: Callable[[], str] = str,
                 priced: bool = True):
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("pass {task.fields[rate]}  errors {task.fields[errors]}  {task.fields[cost]}"
                              "{task.fields[caps]}"),
                   TextColumn("ETA"), TimeRemainingColumn()]
        self.bar = Progress(*columns, console=console, transient=False)
        self.total, self.caps, self.priced = total, caps, priced
        self.task = self.bar.add_task(label, total=total, rate="-", errors=0, cost=cost_words(0.0, 0, total, priced),
                                      caps="")

    def __enter__(self) -> _Bar:
        self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.stop()

    def update(self, done: int, correct: int, errors: int, judged: int, cost: float = 0.0) -> None:
        self.bar.update(self.task, completed=done, errors=errors, rate=f"{correct / judged:.0%}" if judged else "-",
                        cost=cost_words(cost, done, self.total, self.priced), caps=self.caps())


class _Lines:
    """Not on a terminal: a plain line every HARNESS_PROGRESS_EVERY seconds (from a timer thread, so
    a run whose instances are slow still shows it is alive) and whenever another 10% of the
    instances are done: `progress: 7/18 instances (39%), pass 6 (86% of done), errors 1, elapsed
    0:42, ETA 1:06` (with `, MODEL cap 2/8 after 429s` while 429s hold the model's cap on calls in flight
    below max_connections). No line after an interrupt: the run's last word is then the interrupt's."""

    def __init__(self, console: Console, label: str, total: int, caps: Callable[[], str] = str,
                 priced: bool = True):
        self.console, self.label, self.total, self.caps, self.priced = console, label, total, caps, priced
        self.every = harness_settings().progress_every
        self.step = max(1, math.ceil(total / 10))
        self.started = time.monotonic()
        self.done = self.correct = self.errors = self.judged = 0
        self.cost = 0.0
        self.lock = threading.Lock()
        self.ended = threading.Event()
        self.timer = threading.Thread(target=self._tick, name="progress", daemon=True)

    def __enter__(self) -> _Lines:
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.ended.set()
        self.timer.join()

    def update(self, done: int, correct: int, errors: int, judged: int, cost: float = 0.0) -> None:
        with self.lock:
            self.done, self.correct, self.errors, self.judged, self.cost = done, correct, errors, judged, cost
        if done % self.step == 0 or done == self.total:
            self._line()

    def _tick(self) -> None:
        while not self.ended.wait(self.every):
            self._line()

    def _line(self) -> None:
        with self.lock:
            done, correct, errors, total, judged = self.done, self.correct, self.errors, self.total, self.judged
            elapsed = time.monotonic() - self.started
            share = f" ({done / total:.0%})" if total else ""
            rate = f" ({correct / judged:.0%} of done)" if judged else ""
            if judged < done:  # unscored instances (no target) are in no rate
                scored = f" ({correct / judged:.0%} of {judged} scored)" if judged else ""
                rate = f"{scored}, unscored {done - judged}"
            eta = _clock(elapsed / done * (total - done)) if done else "-"
            cost = cost_words(self.cost, done, total, self.priced)
            say(self.console, f"progress: {done}/{total} {self.label}{share}, pass {correct}{rate}, errors {errors}, "
                              f"{cost}{self.caps()}, elapsed {_clock(elapsed)}, ETA {eta}")


def model_caps(settings: RunSettings) -> Callable[[], str]:
    """What the progress line says of the agent model's cap on calls in flight: its cap in force when
    429s have lowered it below max_connections (models/slots.py), read from the run's slot files."""
    model = settings.model
    if model.kind != "openai":
        return str
    root = RunDir(settings.output_dir).scratch / "model-slots"
    return lambda: cap_words(root, model.name, model.max_connections)


def cost_words(cost: float, done: int, total: int, priced: bool = True) -> str:
    """Cost so far and the whole selection's projected from the finished instances' mean; for a model
    whose TOML gives no prices, says so rather than show a cost of $0."""
    if not priced:
        return f"cost {NOT_PRICED}"
    projected = f"${cost / done * total:.4f}" if done else "-"
    return f"cost ${cost:.4f} (projected {projected})"


def _clock(seconds: float) -> str:
    """h:mm:ss, or m:ss under an hour."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def write_recording(path: Path, output_dir: Path, recorded: list[dict]) -> None:
    """Turn the traces' model calls into a replay file (see harness/models/replay.py)."""
    with open(path, "a", encoding="utf-8") as fh:
        for item in recorded:
            turns = recorded_turns(read_trace(output_dir / item["trace"]))
            epoch = {"epoch": item["epoch"]} if item["epoch"] > 1 else {}
            fh.write(json.dumps({"instance_id": item["instance_id"], **epoch, "turns": turns}) + "\n")
