"""`harness run`: validate everything, then evaluate the selected instances in parallel.

All checks that can fail for every instance happen before any container starts: the
dataset, selection, config, agent, replay coverage, the output dir (it must take files),
one preflight call to each model the run uses (models/probe.py), one search to its hosted
search provider (environments/websearch/probe.py), the sandboxes'
resources against the engine's capacity, and every MCP server started (a stdio one in one
sandbox) and its tools listed (mcp_preflight.py). Results are appended one row per instance to
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

The checks live in preflight.py, the worker loop and the rescue of refused rows in evaluate.py;
this module runs them in order and writes the report. The terminal gets the report's table, then
the ids that did not end well, the run directory and the commands that open it (report/output.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import time
from pathlib import Path

from rich.console import Console

from harness import exit_codes
from harness.bulk import collector_paused
from harness.config import SITE_INDEX, RunConfiguration, recorded_site_index, web_archives
from harness.datasets import dataset_fingerprint, hub
from harness.environments.websearch.probe import probe_search
from harness.environments.websearch.settings import SearchSettings
from harness.environments.websearch.site import index_site
from harness.errors import InputError
from harness.fsutil import slug, write_atomic
from harness.models.probe import probe_all
from harness.report import Report, append_summary, build_report, render, write_report
from harness.report.breakdown import task_labels
from harness.report.build import unscored_task
from harness.report.output import end_lines
from harness.results.integrity import refuse_foreign, settle
from harness.results.layout import RunDir
from harness.results.run_config import RunConfig, lock_output_dir, save_or_check, vouches
from harness.results.store import pending, read_rows
from harness.runner import forkserver
from harness.runner.agent_process.supervise import reset_scratch
from harness.runner.evaluate import evaluate, rescue_rows
from harness.runner.instance import RunSettings
from harness.runner.mcp_preflight import check_servers
from harness.runner.pool import WarmPool
from harness.runner.preflight import check_capacity, prepare, unreachable_web, unseen_images, unserved_website
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.registry import get_provider
from harness.sandbox.site import site_info
from harness.settings import settings as harness_settings
from harness.terminal import say, stderr_console
from harness.web.search_archive import SEARCH_ARCHIVE


def run(cfg: RunConfiguration, console: Console | None = None) -> int:
    """Evaluate; return the exit code (harness/exit_codes.py). Input problems raise InputError."""
    provider = get_provider(cfg.sandbox.provider)
    # The agents' fork server: forked now, before the dataset is read, so it loads on another core
    # while this process prepares (forkserver.py); ended once the instances are (or on any exit).
    forkserver.start(cfg.agent, cfg.sandbox.provider)
    try:
        with collector_paused() as loaded:  # harness/bulk.py
            return _run(cfg, provider, console or stderr_console(), loaded)
    finally:
        forkserver.close_all()


def _run(cfg: RunConfiguration, provider, console: Console, loaded) -> int:
    prepared = prepare(cfg)
    for warning in probe_all(prepared.models):
        say(console, warning, style="yellow")
    if not cfg.sandbox.web_replay and (busy := probe_search(cfg.search)) is not None:  # a replay asks no provider
        say(console, busy, style="yellow")
    if (unserved := unserved_website(cfg)) is not None:
        say(console, unserved, style="yellow")
    if (no_web := unreachable_web(cfg, prepared.selected)) is not None:
        say(console, no_web, style="yellow")
    if (unseen := unseen_images(prepared.section, prepared.selected)) is not None:
        say(console, unseen, style="yellow")
    selected, section = prepared.selected, prepared.section
    # Preflight: the engine, the image and the network policy, before any instance starts.
    image = provider.preflight(network=cfg.sandbox.network, log=lambda m: say(console, m))
    check_capacity(cfg.sandbox, provider.capacity())
    output_dir, epochs, force, website = cfg.output.dir, cfg.epochs.count, cfg.output.force, cfg.sandbox.website
    layout = RunDir(output_dir)
    out = layout.output
    instances = prepared.instances
    run_id = f"{slug(output_dir.name, 12)}-{secrets.token_hex(3)}"
    if selected:  # every MCP server started (stdio: in one sandbox) and its tools listed, else exit 2
        check_servers(cfg.mcp, provider, SandboxSpec(image=image, run_id=run_id, instance_id="mcp-preflight",
                                                     **cfg.sandbox.resources(None)), selected[0],
                      log=lambda m: say(console, m))
    with lock_output_dir(output_dir):
        previous_wall = _previous_wall_time(layout)
        fingerprint = getattr(instances, "fingerprint", None) or dataset_fingerprint(instances)
        vouched = vouches(output_dir, fingerprint)  # before run.json is replaced
        refuse_foreign(out, instances, vouched=vouched, force=force)  # rows of another dataset
        earlier = save_or_check(output_dir, RunConfig.of(
            cfg, dataset_fingerprint=fingerprint, image=image, model_settings=section.public(),
            website=site_info(website) if website is not None else None,
            prompt_template=prepared.prompt.fingerprint, run_id=run_id,
            dataset_revision=getattr(instances, "revision", None)), force=force)
        tasks = {i.instance_id: t for i in selected
                 if (t := {**i.expectations(), **task_labels(i.metadata), **unscored_task(i.answer)})}
        tasks_json = json.dumps(tasks)
        basis = _report_basis(fingerprint, tasks_json, cfg)
        # selected.json, questions.json and metadata.json follow from the dataset and the selection:
        # unchanged since the run before (the same dataset fingerprint and selection), they are not written again.
        if not (earlier is not None and earlier.dataset_fingerprint == fingerprint
                and earlier.selection == cfg.selection and layout.selected.exists() and layout.questions.exists()
                and layout.metadata.exists()):
            _write(layout.selected, json.dumps({i.instance_id: i.level for i in selected}))
            _write(layout.questions, json.dumps({i.instance_id: i.question for i in selected}))
            _write(layout.metadata, json.dumps({i.instance_id: i.metadata for i in selected if i.metadata}))
        _write(layout.tasks, tasks_json)
        # What resuming needs of each row (the full rows only for a new report), once output.jsonl is put
        # right: torn, damaged and foreign lines, rescued rows (results/integrity.py).
        scanned, notes = settle(out, instances, vouched=vouched, force=force)
        for note in notes:
            say(console, note, style="yellow")
        reset_scratch(output_dir)
        reaped = provider.cleanup()
        if reaped:
            say(console, f"removed {len(reaped)} container(s) left by killed harness processes")
        to_run, done = pending([i.instance_id for i in selected], scanned.rows, epochs)
        del scanned
        loaded()
        if done:
            what = "instance(s)" if epochs == 1 else f"of {len(selected) * epochs} instance runs"
            say(console, f"resuming: {len(done)} {what} already finished, {len(to_run)} to run")
        by_id = {i.instance_id: i for i in selected}
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            network = None
            if website is not None and to_run:
                network = stack.enter_context(provider.website(website, image, run_id))
                say(console, f"website {site_info(website)[0]} up ({network})")
            if to_run and (cfg.sandbox.web_record or cfg.sandbox.web_replay):
                network = stack.enter_context(_web_proxy(cfg, provider, run_id, network, layout, console))
            search = _search_for_run(cfg, provider, image, run_id, network, layout, console) if to_run else cfg.search
            pool, warm = None, cfg.sandbox.warm_pool
            if warm and to_run:  # closed before the site goes and before the leak audit
                pool = stack.enter_context(WarmPool(provider, SandboxSpec(
                    image=image, run_id=run_id, instance_id="warm", **cfg.sandbox.resources(network)),
                    min(warm, len(to_run)), total=len(to_run)))
            settings = RunSettings.of(cfg, run_id=run_id, image=image, model=section, provider=provider,
                                      scorers=prepared.scorers, network=network, replay=prepared.replay, pool=pool,
                                      prompt=prepared.prompt, dataset=fingerprint[:16], search=search)
            try:
                outcome = evaluate([(by_id[i], e) for i, e in to_run], settings, out, cfg, console,
                                   len(selected) * epochs)
            except BaseException:  # Ctrl-C (a second one may have cut the removals short), or a crash
                provider.cleanup(run_id=run_id)
                raise
        leaked = _leak_audit(provider, run_id, console)
        if outcome.refused is not None:
            return rescue_rows(layout, outcome, leaked, console)
        wall = time.monotonic() - started
        if previous_wall is not None:  # a resume adds its time; one with nothing to run keeps the total
            wall = previous_wall + wall if to_run else previous_wall
        report = None if to_run or leaked else _unchanged_report(layout, basis)
        if report is None:
            with collector_paused():  # every row read in full: as many objects as at loading
                report = build_report(read_rows(out), [i.instance_id for i in selected], leaked_containers=leaked,
                                      wall_time_s=wall, levels={i.instance_id: i.level for i in selected},
                                      epochs=epochs, reducers=list(cfg.epochs.reducers),
                                      normalize=getattr(prepared.scorers[0], "normalize", None),
                                      tasks=tasks, run_dir=layout.root)
            report.basis = basis
            try:
                write_report(report, output_dir)
            except OSError as exc:  # a full disk after the last row: the rows are all there (exit 4)
                say(console, f"error: cannot write the report {layout.report}: {exc}; every finished row is in "
                             f"{out}: run again with --output-dir {layout.root} once the disk takes files "
                             "(it writes the report)", style="red")
                return exit_codes.ROWS_NOT_WRITTEN
        try:
            append_summary(report, cfg.output.summary_csv or output_dir.parent / "summary.csv",
                           run_label=output_dir.name, output_dir=output_dir,
                           extra={"model": cfg.model_flag, "agent": cfg.agent, "dataset": hub.shown(cfg.dataset.path)})
        except OSError as exc:
            say(console, f"warning: cannot update the summary CSV: {exc}", style="yellow")
    stdout = Console()
    stdout.print(render(report))
    for line in end_lines(report, output_dir):  # what did not end well, where the run is, how to open it
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
    code = _exit_code(report)
    if code == exit_codes.OK and outcome.over_budget:
        return exit_codes.INSTANCE_ERRORS
    return exit_codes.DIVERGED if code == exit_codes.OK and diverged is not None else code


@contextlib.contextmanager
def _web_proxy(cfg: RunConfiguration, provider, run_id: str, network: str | None, layout: RunDir, console: Console):
    """--web-record / --web-replay: the run's web proxy (sandbox/docker/webproxy.py); yields the sandboxes'
    network policy (the site's when recording, the proxy's own internal network when replaying)."""
    if not hasattr(provider, "web_proxy"):
        raise InputError(f"--web-record/--web-replay need the docker sandbox provider, not {provider.name}")
    upstream = harness_settings().web_upstream_ca
    options = {"upstream_ca": Path(upstream).read_bytes() if upstream else None, "log_": lambda m: say(console, m)}
    if cfg.sandbox.web_replay:
        archives = tuple(a for folder in cfg.sandbox.web_replay for a in web_archives(folder))
        with provider.web_proxy("replay", run_id, None, archives=archives, **options) as proxy:
            say(console, f"web replay: {len(archives)} archive(s) served, nothing live ({proxy.network})")
            yield f"internal:{proxy.network}"
        return
    out = layout.root / "web" / f"{run_id}.warc.gz"
    with provider.web_proxy("record", run_id, network, out=out, **options) as proxy:
        say(console, f"web record: every page the browsers load goes to {out}")
        yield network or f"internal:{proxy.network}"


def _search_for_run(cfg: RunConfiguration, provider, image: str, run_id: str, network: str | None,
                    layout: RunDir, console: Console) -> SearchSettings:
    """The run's search settings for its agents: the cache folder, and for `site` the offline website
    crawled and indexed now, once, before the first instance (environments/websearch/site.py). A
    --web-record run indexes into web/ (shared with its archive) and records the provider's exchanges
    in web/search.warc.gz; a --web-replay run searches the recorded index or archives, never live."""
    index, replayed = None, cfg.sandbox.web_replay or ()
    if cfg.search.provider == "site" and cfg.sandbox.website is not None and network is not None:
        alias = site_info(cfg.sandbox.website)[0]
        index = layout.root / ("web" if cfg.sandbox.web_record else "") / SITE_INDEX
        spec = SandboxSpec(image=image, run_id=run_id, instance_id="site-crawl", **cfg.sandbox.resources(network))
        pages, passages = index_site(provider, spec, alias, index)
        say(console, f"site search: {pages} page(s) of {alias} indexed ({passages} passages)")
    elif cfg.search.provider == "site" and replayed:
        index = next(i for folder in replayed if (i := recorded_site_index(folder)) is not None)
        say(console, f"site search: the recorded index {index}")
    return cfg.search.for_run(layout.root, index,
                              web_record=layout.root / "web" / SEARCH_ARCHIVE if cfg.sandbox.web_record else None,
                              web_replay=tuple(a for folder in replayed for a in web_archives(folder)))


def _write(path, text: str) -> None:
    """A file of the run directory written before any container: a refusal is the output dir's fault (exit 2)."""
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc}") from None


def _report_basis(fingerprint: str, tasks_json: str, cfg: RunConfiguration) -> str:
    """What a report is computed from besides the rows: the dataset, the selection, the tasks' labels,
    epochs, reducers and scorers. A report with the same basis, newer than output.jsonl, is still true."""
    blob = json.dumps([fingerprint, cfg.selection.model_dump(mode="json"), tasks_json, cfg.epochs.count,
                       list(cfg.epochs.reducers), list(cfg.scoring.names)],
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


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


def _leak_audit(provider, run_id: str, console: Console) -> int:
    """Every container of this run (sandboxes and website) must be gone now. A removal that failed
    during the run (e.g. the engine was restarting) is tried once more; what still stands is leaked."""
    if not provider.find(run_id):
        return 0
    swept = provider.cleanup(run_id=run_id)
    say(console, f"removed {len(swept)} container(s) of this run whose removal had failed", style="yellow")
    return len(provider.find(run_id))


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


def _exit_code(report: Report) -> int:
    if report.leaked_containers:
        return exit_codes.FAILED
    if report.n_errors or report.n_missing or report.missing_verdicts() is not None:
        return exit_codes.INSTANCE_ERRORS
    return exit_codes.OK


