"""`harness run`: validate everything, then evaluate the selected instances in parallel.

All checks that can fail for every instance happen before any container starts: the
dataset, selection, config, agent, replay coverage, the output dir (it must take files),
one preflight call to each model the run uses (models/probe.py), and the sandboxes'
resources against the engine's capacity. Results are appended one row per instance to
DIR/output.jsonl; a re-run into the same DIR resumes (rows rescued by a failed run are
merged first, finished rows are kept, errored ones are retried) unless the configuration
changed.

Rules for stopping early: once output.jsonl refuses a row, or once --fail-on-error's
number of errored instances is reached, no new instance starts; running ones finish and
their rows are kept (in output.jsonl, or rescued beside it). Ctrl-C, SIGTERM and SIGHUP
kill the agents and remove the run's sandboxes (harness/signals.py). The exit code
(harness/exit_codes.py) says how the run ended: 0 only when every selected instance
ended without an error.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from harness import exit_codes
from harness.agents.contract import Limits, UserSimulation
from harness.agents.registry import resolve
from harness.agents.user import reply_function
from harness.datasets import dataset_fingerprint, load_dataset, select
from harness.errors import InputError
from harness.fsutil import slug, write_atomic
from harness.models.config import ModelSection, load_config, model_section
from harness.models.probe import probe_all
from harness.models.replay import load_turns
from harness.report import Report, append_summary, build_report, render, write_report
from harness.results.layout import RunDir
from harness.results.model import ResultRow
from harness.results.run_config import RunConfig, lock_output_dir, save_or_check
from harness.results.store import RowWriter, merge_rescue, pending, read_rows, repair, rescue
from harness.runner.instance import RunSettings, kill_agents, reset_scratch, run_instance
from harness.runner.scorers import build_scorers, judge_section
from harness.sandbox.contract import parse_size
from harness.sandbox.registry import DEFAULT, get_provider
from harness.sandbox.site import site_info
from harness.terminal import say, stderr_console
from harness.traces import ModelCall, read_trace

MIN_MEMORY = "64m"  # below this the sandbox's own service and Python do not start reliably


@dataclass(frozen=True)
class ErrorBudget:
    """--fail-on-error: a number of errored instances, or a fraction of the selected ones."""

    text: str
    count: int | None = None
    fraction: float | None = None

    def threshold(self, selected: int) -> int:
        if self.count is not None:
            return self.count
        return max(1, math.ceil(self.fraction * selected))


def error_budget(text: str | None) -> ErrorBudget | None:
    """'5' -> five errors; '0.2' or '20%' -> a fifth of the selected instances. InputError otherwise."""
    if text is None:
        return None
    raw = text.strip()
    try:
        if raw.endswith("%") or "." in raw:
            fraction = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
            if 0 < fraction <= 1:
                return ErrorBudget(text=raw, fraction=fraction)
        elif int(raw) >= 1:
            return ErrorBudget(text=raw, count=int(raw))
    except ValueError:
        pass
    raise InputError(f"--fail-on-error takes a count >= 1 or a fraction in (0, 1] like 0.2 or 20%, not {text!r}")


@dataclass
class RunOptions:
    dataset: Path
    model: str
    output_dir: Path
    split: str | None = None
    agent: str = "assistant"
    workers: int = 2
    config: Path | None = None
    max_retries: int = 2
    limits: Limits = field(default_factory=Limits)
    scorers: list[str] = field(default_factory=lambda: ["gaia"])
    selection: dict = field(default_factory=dict)  # ids, skip, offset, stride, shuffle, seed, limit
    sandbox: dict = field(default_factory=dict)  # memory, cpus, pids, network
    provider: str = DEFAULT  # --sandbox
    user: UserSimulation = field(default_factory=UserSimulation)
    force: bool = False
    record: Path | None = None
    summary_csv: Path | None = None
    judge_model: str | None = None
    website: Path | None = None  # an offline site folder (harness/sandbox/site.py)
    fail_on_error: ErrorBudget | None = None
    all_instances: list = field(default_factory=list)  # filled by validation: the whole dataset


@dataclass
class Prepared:
    """What validation found: the instances, the model sections in use, the scorers."""

    instances: list
    selected: list
    section: ModelSection
    scorers: list
    replay: dict | None
    models: list[tuple[str, ModelSection]]  # (flag, section) of every model the run calls


@dataclass
class Outcome:
    """How the evaluation loop ended."""

    write_error: OSError | None = None  # output.jsonl refused a row
    held: list[ResultRow] = field(default_factory=list)  # rows it did not take
    stopped: str | None = None  # why no more instances were started


def _prepare(opts: RunOptions) -> Prepared:
    """Every check that needs no container (nor the engine). Raises InputError (exit 2)."""
    if opts.workers < 1:
        raise InputError("--workers must be >= 1")
    if opts.max_retries < 0:
        raise InputError("--max-retries must be >= 0")
    instances = load_dataset(opts.dataset, opts.split)
    selected = select(instances, **opts.selection)
    opts.all_instances = instances
    config = load_config(opts.config)
    root = Path(opts.dataset) if Path(opts.dataset).is_dir() else Path(opts.dataset).parent
    section = model_section(config, opts.model, dataset_root=root)
    resolve(opts.agent)
    reply_function(opts.user)
    get_provider(opts.provider)
    if opts.website is not None:
        site_info(opts.website)
        if opts.sandbox.get("network", "none") != "none":
            raise InputError("--website gives sandboxes the site's internal network; drop --network")
    _check_memory_floor(opts.sandbox)
    scorers = build_scorers(opts.scorers, config, opts.judge_model)
    models = [("--model", section)]
    if any(name.partition(":")[0] == "llm_judge" for name in opts.scorers):
        models.append(("--judge-model", judge_section(config, opts.judge_model)))
    replay = None
    if section.kind == "replay":
        replay = load_turns(Path(section.path))
        missing = [i.instance_id for i in selected if i.instance_id not in replay]
        if missing:
            raise InputError(f"replay file {section.path} has no turns for: {', '.join(missing[:10])}")
    _check_output_dir(opts.output_dir)
    return Prepared(instances, selected, section, scorers, replay, models)


def _check_memory_floor(sandbox: dict) -> None:
    memory = sandbox.get("memory")
    if memory is not None and parse_size(memory) < parse_size(MIN_MEMORY):
        raise InputError(f"--memory {memory}: a sandbox needs at least {MIN_MEMORY}")


def _check_capacity(sandbox: dict, capacity) -> None:
    """Each sandbox's --cpus and --memory must fit the engine (None: the provider cannot tell)."""
    if capacity is None:
        return
    cpus, memory = sandbox.get("cpus"), sandbox.get("memory")
    if cpus is not None and capacity.cpus and cpus > capacity.cpus:
        raise InputError(f"--cpus {cpus}: the engine has {capacity.cpus:g} CPU(s)")
    if memory is not None and capacity.memory and parse_size(memory) > capacity.memory:
        raise InputError(f"--memory {memory}: the engine has {capacity.memory / 2**30:.1f} GiB in all")


def _check_output_dir(path: Path) -> None:
    """The output dir can be made and takes new files, and an existing output.jsonl takes appends."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
        out = RunDir(path).output
        if out.exists() or out.is_symlink():
            os.close(os.open(out, os.O_WRONLY | os.O_APPEND))
    except OSError as exc:
        raise InputError(f"--output-dir {path} is not writable: {exc}") from None


def run(opts: RunOptions, console: Console | None = None) -> int:
    """Evaluate; return the exit code (harness/exit_codes.py). Input problems raise InputError."""
    console = console or stderr_console()
    prepared = _prepare(opts)
    for warning in probe_all(prepared.models):
        say(console, warning, style="yellow")
    selected, section = prepared.selected, prepared.section
    provider = get_provider(opts.provider)
    # Preflight: the engine, the image and the network policy, before any instance starts.
    image = provider.preflight(network=opts.sandbox.get("network", "none"), log=lambda m: say(console, m))
    _check_capacity(opts.sandbox, provider.capacity())
    layout = RunDir(opts.output_dir)
    out = layout.output
    environment = dict(opts.sandbox)
    if opts.provider != DEFAULT:
        environment["provider"] = opts.provider
    if opts.website is not None:
        environment["website"] = site_info(opts.website)
    run_id = f"{slug(opts.output_dir.name, 12)}-{secrets.token_hex(3)}"
    with lock_output_dir(opts.output_dir):
        previous_wall = _previous_wall_time(layout)
        save_or_check(opts.output_dir, RunConfig(
            dataset=str(opts.dataset), dataset_fingerprint=dataset_fingerprint(opts.all_instances), model=opts.model,
            model_settings=section.public(), agent=opts.agent, image=image, limits=opts.limits.model_dump(),
            scorers=opts.scorers + ([f"judge={opts.judge_model}"] if opts.judge_model else []),
            selection=opts.selection, environment=environment, user=opts.user.model_dump(),
            run_ids=[run_id]), force=opts.force)
        write_atomic(layout.selected, json.dumps({i.instance_id: i.level for i in selected}))
        write_atomic(layout.questions, json.dumps({i.instance_id: i.question for i in selected}))
        if repair(out):
            say(console, "repaired a torn last line in output.jsonl (a crash mid-write)", style="yellow")
        try:
            merged = merge_rescue(out)
        except OSError as exc:
            raise InputError(f"cannot merge the rescued rows of {layout.rescue} into {out}: {exc}") from None
        if merged:
            say(console, f"merged {merged} row(s) rescued by an earlier run from {layout.rescue}")
        reset_scratch(opts.output_dir)
        reaped = provider.cleanup()
        if reaped:
            say(console, f"removed {len(reaped)} container(s) left by killed harness processes")
        to_run, done = pending([i.instance_id for i in selected], read_rows(out))
        if done:
            say(console, f"resuming: {len(done)} instance(s) already finished, {len(to_run)} to run")
        by_id = {i.instance_id: i for i in selected}
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            sandbox = dict(opts.sandbox)
            if opts.website is not None and to_run:
                sandbox["network"] = stack.enter_context(provider.website(opts.website, image, run_id))
                say(console, f"website {site_info(opts.website)[0]} up ({sandbox['network']})")
            settings = RunSettings(run_id=run_id, image=image, agent=opts.agent, model=section,
                                   limits=opts.limits, output_dir=opts.output_dir, provider=provider,
                                   scorers=prepared.scorers, max_retries=opts.max_retries, sandbox=sandbox,
                                   user=opts.user, replay=prepared.replay)
            try:
                outcome = _evaluate([by_id[i] for i in to_run], settings, out, opts, console, len(selected))
            except KeyboardInterrupt:
                provider.cleanup(run_id=run_id)  # a second Ctrl-C may have cut the removals short
                raise
        leaked = _leak_audit(provider, run_id, console)
        if outcome.write_error is not None:
            return _rescue(layout, outcome, leaked, console)
        wall = time.monotonic() - started
        if previous_wall is not None:  # a resume adds its time; one with nothing to run keeps the total
            wall = previous_wall + wall if to_run else previous_wall
        report = build_report(read_rows(out), [i.instance_id for i in selected], leaked_containers=leaked,
                              wall_time_s=wall, levels={i.instance_id: i.level for i in selected})
        write_report(report, opts.output_dir)
        append_summary(report, opts.summary_csv or opts.output_dir.parent / "summary.csv",
                       run_label=opts.output_dir.name, output_dir=opts.output_dir,
                       extra={"model": opts.model, "agent": opts.agent, "dataset": str(opts.dataset)})
    Console().print(render(report))
    if outcome.stopped:
        say(console, outcome.stopped, style="yellow")
    return _exit_code(report)


def _previous_wall_time(layout: RunDir) -> float | None:
    """The wall time an earlier run into this directory reported (None: no readable report)."""
    try:
        value = json.loads(layout.report.read_text(encoding="utf-8")).get("wall_time_s")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def _leak_audit(provider, run_id: str, console: Console) -> int:
    """Every container of this run (sandboxes and website) must be gone now. A removal that failed
    during the run (e.g. the engine was restarting) is tried once more; what still stands is leaked."""
    if not provider.find(run_id):
        return 0
    swept = provider.cleanup(run_id=run_id)
    say(console, f"removed {len(swept)} container(s) of this run whose removal had failed", style="yellow")
    return len(provider.find(run_id))


def _exit_code(report: Report) -> int:
    if report.leaked_containers:
        return exit_codes.FAILED
    if report.n_errors or report.n_missing:
        return exit_codes.INSTANCE_ERRORS
    return exit_codes.OK


def _rescue(layout: RunDir, outcome: Outcome, leaked: int, console: Console) -> int:
    """Put the rows output.jsonl refused somewhere durable and say where (or print them)."""
    held = outcome.held
    place = rescue(layout.output, held)
    say(console, f"error: cannot write results to {layout.output}: {outcome.write_error}", style="red")
    if outcome.stopped:
        say(console, outcome.stopped, style="red")
    if place == layout.rescue:
        say(console, f"{len(held)} finished row(s) it did not take are kept in {place}; once {layout.output} "
                     "is writable, re-run the same command: it merges them and resumes", style="red")
    elif place is not None:
        say(console, f"{len(held)} finished row(s) it did not take are kept in {place} (the run directory "
                     f"refused them too); move that file to {layout.rescue} and re-run the same command: "
                     "it merges them and resumes", style="red")
    else:
        say(console, f"{len(held)} finished row(s) could not be saved anywhere; they follow on stdout, one JSON "
                     f"line each: append them to {layout.output}", style="red")
        sys.stdout.write("".join(row.model_dump_json() + "\n" for row in held))
        sys.stdout.flush()
    if leaked:
        say(console, f"{leaked} container(s) of this run are left; `harness cleanup` removes them", style="red")
    return exit_codes.ROWS_NOT_WRITTEN


class _Workers:
    """What the workers share: the row writer, the counts, and whether to start more instances.

    A worker writes its instance's row itself and decides on stopping before it takes the
    next instance, so once output.jsonl refuses a row or the errors reach --fail-on-error,
    no instance starts after it (those already running finish). After an interrupt only
    results (ok, limit) are kept: an error row then is the interrupt's doing (a killed agent),
    and an errored instance is run again on resume anyway."""

    def __init__(self, out: Path, opts: RunOptions, n_selected: int, console: Console, progress: Progress, task):
        self.out, self.console, self.progress, self.task = out, console, progress, task
        self.writer = RowWriter(out)
        self.fail_on_error = opts.fail_on_error
        self.budget = opts.fail_on_error.threshold(n_selected) if opts.fail_on_error else None
        self.record = opts.record is not None
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.interrupted = threading.Event()
        self.why: str | None = None
        self.done = self.correct = self.errors = self.not_started = 0
        self.recorded: list[dict] = []

    def run(self, instance, settings: RunSettings) -> None:
        if self.stop.is_set():
            with self.lock:
                self.not_started += 1
            return
        self.finish(run_instance(instance, settings))

    def finish(self, row: ResultRow) -> None:
        if self.interrupted.is_set() and row.status == "error":
            return
        with self.lock:
            written = self.writer.write(row)
            self.done += 1
            self.correct += bool(row.correct)
            self.errors += row.status == "error"
            if self.record:
                self.recorded.append({"instance_id": row.instance_id, "trace": row.trace})
            if not written and self.why is None:
                self._stop(f"cannot write {self.out}: {self.writer.failed}")
            elif self.budget is not None and self.errors >= self.budget and self.why is None:
                self._stop(f"{self.errors} instance(s) errored (--fail-on-error {self.fail_on_error.text})")
            self.progress.update(self.task, advance=1, errors=self.errors, rate=f"{self.correct / self.done:.0%}")

    def _stop(self, why: str) -> None:
        self.why = why
        self.stop.set()
        say(self.console, f"stopping: {why}; starting no more instances, running ones finish", style="yellow")

    def outcome(self) -> Outcome:
        stopped = None
        if self.why is not None:
            stopped = f"stopped early: {self.why}; {self.not_started} instance(s) not started; re-run to resume"
        return Outcome(write_error=self.writer.failed, held=self.writer.held, stopped=stopped)


def _evaluate(todo, settings: RunSettings, out: Path, opts: RunOptions, console: Console,
              n_selected: int) -> Outcome:
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("pass {task.fields[rate]}  errors {task.fields[errors]}"), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("instances", total=len(todo), rate="-", errors=0)
        workers = _Workers(out, opts, n_selected, console, progress, task)
        # Leaving this block waits for every sandbox removal, on success and on Ctrl-C alike.
        with ThreadPoolExecutor(2, thread_name_prefix="reaper") as reaper, \
                ThreadPoolExecutor(opts.workers) as pool:
            settings.reaper = reaper
            futures = [pool.submit(workers.run, inst, settings) for inst in todo]
            try:
                for future in as_completed(futures):
                    future.result()
            except KeyboardInterrupt:
                workers.interrupted.set()
                for future in futures:
                    future.cancel()
                kill_agents()  # running instances end now; their sandboxes are removed in finally
                raise
    if opts.record is not None:
        _write_recording(opts.record, settings.output_dir, workers.recorded)
    return workers.outcome()


def _write_recording(path: Path, output_dir: Path, recorded: list[dict]) -> None:
    """Turn the traces' model calls into a replay file (see harness/models/replay.py)."""
    with open(path, "a", encoding="utf-8") as fh:
        for item in recorded:
            turns = [({"tool_calls": e.tool_calls} if e.tool_calls else {"content": e.content or ""}) | {"usage": e.usage}
                     for e in read_trace(output_dir / item["trace"]) if isinstance(e, ModelCall)]
            fh.write(json.dumps({"instance_id": item["instance_id"], "turns": turns}) + "\n")
