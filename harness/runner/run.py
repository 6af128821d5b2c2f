"""`harness run`: validate everything, then evaluate the selected instances in parallel.

All input checks (dataset, selection, config, agent, replay coverage) happen before
any container starts. Results are appended one row per instance to
DIR/output.jsonl; a re-run into the same DIR resumes (finished rows are kept,
errored ones are retried) unless the configuration changed.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from harness.fsutil import write_atomic
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from harness.agents.contract import Limits, UserSimulation
from harness.agents.registry import resolve
from harness.agents.user import reply_function
from harness.datasets import dataset_fingerprint, load_dataset, select
from harness.errors import InputError
from harness.fsutil import slug
from harness.models.config import load_config, model_section
from harness.models.replay import load_turns
from harness.report import append_summary, build_report, render, write_report
from harness.results.layout import RunDir
from harness.results.model import ResultRow
from harness.results.run_config import RunConfig, lock_output_dir, save_or_check
from harness.results.store import append_row, pending, read_rows, repair
from harness.runner.scorers import build_scorers
from harness.runner.instance import RunSettings, kill_agents, run_instance
from harness.sandbox.registry import DEFAULT, get_provider
from harness.sandbox.site import site_info
from harness.traces import ModelCall, read_trace


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
    all_instances: list = field(default_factory=list)  # filled by validation: the whole dataset


def _prepare(opts: RunOptions):
    """Every check that needs no container. Raises InputError (exit 2)."""
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
    scorers = build_scorers(opts.scorers, config, opts.judge_model)
    replay = None
    if section.kind == "replay":
        replay = load_turns(Path(section.path))
        missing = [i.instance_id for i in selected if i.instance_id not in replay]
        if missing:
            raise InputError(f"replay file {section.path} has no turns for: {', '.join(missing[:10])}")
    return instances, selected, section, scorers, replay


def run(opts: RunOptions, console: Console | None = None) -> int:
    console = console or Console(stderr=True)
    instances, selected, section, scorers, replay = _prepare(opts)
    provider = get_provider(opts.provider)
    # Preflight: the engine, the image and the network policy, before any instance starts.
    image = provider.preflight(network=opts.sandbox.get("network", "none"), log=lambda m: console.print(m))
    opts.output_dir.mkdir(parents=True, exist_ok=True)
    layout = RunDir(opts.output_dir)
    out = layout.output
    environment = dict(opts.sandbox)
    if opts.provider != DEFAULT:
        environment["provider"] = opts.provider
    if opts.website is not None:
        environment["website"] = site_info(opts.website)
    with lock_output_dir(opts.output_dir):
        save_or_check(opts.output_dir, RunConfig(
            dataset=str(opts.dataset), dataset_fingerprint=dataset_fingerprint(opts.all_instances), model=opts.model,
            model_settings=section.public(), agent=opts.agent, image=image, limits=opts.limits.model_dump(),
            scorers=opts.scorers + ([f"judge={opts.judge_model}"] if opts.judge_model else []),
            selection=opts.selection, environment=environment, user=opts.user.model_dump()), force=opts.force)
        write_atomic(layout.selected, json.dumps({i.instance_id: i.level for i in selected}))
        write_atomic(layout.questions, json.dumps({i.instance_id: i.question for i in selected}))
        if repair(out):
            console.print("[yellow]repaired a torn last line in output.jsonl (a crash mid-write)[/yellow]")
        reaped = provider.cleanup()
        if reaped:
            console.print(f"removed {len(reaped)} container(s) left by killed harness processes")
        to_run, done = pending([i.instance_id for i in selected], read_rows(out))
        if done:
            console.print(f"resuming: {len(done)} instance(s) already finished, {len(to_run)} to run")
        by_id = {i.instance_id: i for i in selected}
        run_id = f"{slug(opts.output_dir.name, 12)}-{secrets.token_hex(3)}"
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            sandbox = dict(opts.sandbox)
            if opts.website is not None and to_run:
                sandbox["network"] = stack.enter_context(provider.website(opts.website, image, run_id))
                console.print(f"website {site_info(opts.website)[0]} up ({sandbox['network']})")
            settings = RunSettings(run_id=run_id, image=image, agent=opts.agent, model=section,
                                   limits=opts.limits, output_dir=opts.output_dir, provider=provider,
                                   scorers=scorers, max_retries=opts.max_retries, sandbox=sandbox, user=opts.user,
                                   replay=replay)
            try:
                _evaluate([by_id[i] for i in to_run], settings, out, opts, console)
            except KeyboardInterrupt:
                provider.cleanup(run_id=run_id)  # a second Ctrl-C may have cut the removals short
                raise
        # The leak audit: every container of this run (sandboxes and website) must be gone now.
        leaked = len(provider.find(run_id))
        report = build_report(read_rows(out), [i.instance_id for i in selected], leaked_containers=leaked,
                              wall_time_s=time.monotonic() - started,
                              levels={i.instance_id: i.level for i in selected})
        write_report(report, opts.output_dir)
        append_summary(report, opts.summary_csv or opts.output_dir.parent / "summary.csv",
                       run_label=opts.output_dir.name,
                       extra={"model": opts.model, "agent": opts.agent, "dataset": str(opts.dataset)})
    Console().print(render(report))
    return 0 if leaked == 0 else 1


def _evaluate(todo, settings: RunSettings, out: Path, opts: RunOptions, console: Console) -> None:
    stats = {"done": 0, "correct": 0, "errors": 0}
    lock = threading.Lock()
    recorded: list[dict] = []
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("pass {task.fields[rate]}  errors {task.fields[errors]}"), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("instances", total=len(todo), rate="-", errors=0)
        # Leaving this block waits for every sandbox removal, on success and on Ctrl-C alike.
        with ThreadPoolExecutor(2, thread_name_prefix="reaper") as reaper, \
                ThreadPoolExecutor(opts.workers) as pool:
            settings.reaper = reaper
            futures = {pool.submit(run_instance, inst, settings): inst for inst in todo}
            try:
                for future in as_completed(futures):
                    row: ResultRow = future.result()
                    append_row(out, row)
                    with lock:
                        stats["done"] += 1
                        stats["correct"] += bool(row.correct)
                        stats["errors"] += row.status == "error"
                        if opts.record is not None:
                            recorded.append({"instance_id": row.instance_id, "trace": row.trace})
                    progress.update(task, advance=1, errors=stats["errors"],
                                    rate=f"{stats['correct'] / stats['done']:.0%}")
            except KeyboardInterrupt:
                for future in futures:
                    future.cancel()
                kill_agents()  # running instances end now; their sandboxes are removed in finally
                console.print("[yellow]interrupted: finished rows are kept; re-run to resume[/yellow]")
                raise
    if opts.record is not None:
        _write_recording(opts.record, settings.output_dir, recorded)


def _write_recording(path: Path, output_dir: Path, recorded: list[dict]) -> None:
    """Turn the traces' model calls into a replay file (see harness/models/replay.py)."""
    with open(path, "a", encoding="utf-8") as fh:
        for item in recorded:
            turns = [({"tool_calls": e.tool_calls} if e.tool_calls else {"content": e.content or ""}) | {"usage": e.usage}
                     for e in read_trace(output_dir / item["trace"]) if isinstance(e, ModelCall)]
            fh.write(json.dumps({"instance_id": item["instance_id"], "turns": turns}) + "\n")
