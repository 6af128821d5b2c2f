"""One instance, start to finish: sandbox -> agent process -> answer -> score -> result row.

Retries are decided by the error's type: a retryable error (infra: the engine, a dead
sandbox) gets a fresh sandbox after a backoff; agent, model, input and harness errors
are recorded, not retried. A harness bug is recorded as kind `harness` with its
traceback in the trace. A file the run directory refused the harness (OwnFileRefused: an agent's
request, trace or result, a trace's verdict) is the harness's failure too, and is returned with the
row (`Finished.refused`): the run starts no more instances (evaluate.py). Every path ends in exactly
one ResultRow.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import traceback
from collections.abc import Iterator, Mapping
from concurrent.futures import Executor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agents.contract import AgentRequest, AgentResult, Limits, UserSimulation
from harness.answers import extract_answer
from harness.benchmark import get as get_benchmark
from harness.config import RunConfiguration
from harness.config import Sandbox as SandboxResources
from harness.datasets.model import Instance
from harness.environments.families import record, verdicts_after_kill
from harness.environments.mcp_config import McpServer
from harness.environments.websearch.settings import SearchSettings
from harness.errors import (
    HarnessError,
    InfraError,
    InputError,
    OwnFileRefused,
    SandboxOutputLimit,
    SandboxRequestError,
)
from harness.models.budget import BudgetSpec, RunBudget
from harness.models.config import ModelSection
from harness.models.replay import ReplayCheck, Turns, check_replay, turns_for
from harness.results.integrity import instance_hash
from harness.results.layout import RunDir
from harness.results.model import ResultRow, Status
from harness.runner.agent_process.servers import ForkServers
from harness.runner.agent_process.supervise import cancelled, own_write, run_agent, stopping
from harness.runner.appends import append_divergences, append_verdict, judge_calls
from harness.runner.pool import WarmPool
from harness.runner.prompt import DEFAULT as DEFAULT_PROMPT
from harness.runner.prompt import PromptTemplate, instruction, later_steps
from harness.sandbox.contract import Sandbox, SandboxProvider, SandboxSpec
from harness.scoring.apply import context_for, judge_usage, score_row, unscored_reason
from harness.settings import settings
from harness.traces import ErrorEvent, LimitEvent, Tracer, append_event
from harness.traces.forensics import TraceFacts, read_facts
from harness.usage import Price, Usage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSettings:
    """What a worker needs of the run: a view of its configuration (harness/config.py, `of`) and
    what the run made for it (the image, the provider, the scorers, the recording, the pools).
    Read by every worker thread at once, so never changed once made (`dataclasses.replace` makes another)."""

    run_id: str
    image: str
    agent: str
    model: ModelSection
    limits: Limits
    output_dir: Path
    provider: SandboxProvider
    scorers: list = field(default_factory=list)  # Scorer objects; the first gives `correct`
    max_retries: int = 2
    sandbox: SandboxResources = field(default_factory=SandboxResources)  # each sandbox's resources and network
    network: str | None = None  # the offline website's network, once it is up (else the section's)
    user: UserSimulation = field(default_factory=UserSimulation)
    # replay models: the recording (a dict in tests), read per instance
    replay: Turns | Mapping[str, list[dict[str, Any]]] | None = None
    # Where sandboxes are removed. Removing a container whose Chromium ran takes ~4 s here
    # (the engine tears down its memory cgroup), so a run removes them on a background pool
    # and waits for it before its leak audit; None removes them in the worker itself.
    reaper: Executor | None = None
    pool: WarmPool | None = None  # --warm-pool: started sandboxes to take before starting one
    dataset: str | None = None  # the dataset's fingerprint, carried by every row (results/integrity.py)
    prompt: PromptTemplate = DEFAULT_PROMPT  # --prompt-template: the task's instruction (runner/prompt.py)
    search: SearchSettings | None = None  # web_search and the leakage guard, for every agent (environments/websearch/)
    mcp: tuple[McpServer, ...] = ()  # the run's MCP servers, connected by each agent process
    budget: BudgetSpec | None = None  # --max-cost: the run's spend, shared by every agent (models/budget.py)
    cache: Path | None = None  # --cache DIR: the agents' response cache (models/cache.py)
    forks: ForkServers | None = None  # the run's fork servers (agent_process/servers.py); None: every agent fresh
    images: Mapping[str, str] = field(default_factory=dict)  # an instance's own image (Instance.image): its reference
    judge: ModelSection | None = None  # --judge-model: also the judge a tool family asks through the host (Gaia2's)

    @classmethod
    def of(cls, cfg: RunConfiguration, **run: Any) -> RunSettings:
        """The view of `cfg` a worker reads, with what the run made (`run`: run_id, image, model...)."""
        budget = None if cfg.execution.max_cost is None else BudgetSpec(
            directory=str(RunDir(cfg.output.dir).scratch / "budget"), limit=cfg.execution.max_cost)
        return cls(agent=cfg.agent, limits=cfg.limits, output_dir=cfg.output.dir, max_retries=cfg.execution.max_retries,
                   sandbox=cfg.sandbox, user=cfg.user, mcp=cfg.mcp, budget=budget, cache=cfg.replay.cache,
                   judge=cfg.scoring.judge, **run)


@contextmanager
def _sandbox(settings_: RunSettings, spec: SandboxSpec) -> Iterator[Sandbox]:
    """A sandbox (a warm one when the pool has one) removed on every way out; by the reaper when there is one."""
    warm = settings_.pool is not None and spec.image == settings_.image  # the pool holds sandbox-image sandboxes
    sandbox = settings_.pool.take() if warm and settings_.pool is not None else None
    if sandbox is None:
        if warm and settings_.pool is not None:
            settings_.pool.started_cold()
        sandbox = settings_.provider.start(spec)
    try:
        yield sandbox
    finally:
        if settings_.reaper is None:
            _teardown_logged(settings_.provider, sandbox)
        else:
            try:
                settings_.reaper.submit(_teardown_logged, settings_.provider, sandbox)
            except RuntimeError:  # the pool is shutting down (Ctrl-C): remove it here
                _teardown_logged(settings_.provider, sandbox)


@contextmanager
def _judge_sandbox(settings_: RunSettings, spec: SandboxSpec, instance: Instance,
                   wanted: bool) -> Iterator[Sandbox | None]:
    """The instance's judge's sandbox when its benchmark wants one (`Benchmark.judge_sandbox`: Gaia2's ARE), with
    the instance's files, or the instance asks for one (`Instance.judge_sandbox`: a Harbor task's separate verifier);
    else None. Of the instance's image (or its judge's own), with no network whatever the run's unless the instance
    asks for the run's: only the host reaches it (docs/sandboxes.md, "The judge's sandbox")."""
    if not wanted and instance.judge_sandbox is None:
        yield None
        return
    resources = instance.judge_resources(settings_.sandbox.resources(settings_.network))
    own = instance.judge_sandbox.image if instance.judge_sandbox is not None else None
    if own is not None:  # an image of its own, made present by the preflight
        resources["image"] = settings_.images[own]
    with _sandbox(settings_, spec.model_copy(update=resources)) as sandbox:
        if wanted:
            _copy_files(sandbox, instance, instance.files)
        yield sandbox


def _keep_record(instance: Instance, sandbox: Sandbox, trace_path: Path, refused: list[OwnFileRefused]) -> None:
    """The benchmark's own record of the run (`Benchmark.record`: Gaia2's ARE trace), read where its judging ran
    before that sandbox goes, kept beside the trace (its .jsonl replaced by the record's suffix). Not kept, the row
    stands: a sandbox that cannot give it is logged, a file the run directory refuses is the run's `refused`."""
    try:
        kept = record(instance, sandbox)
    except HarnessError as exc:
        log.warning("no record of %s's run kept: %s", instance.instance_id, exc)
        return
    if kept is not None:
        path = trace_path.with_name(trace_path.name.removesuffix(".jsonl") + kept[0])
        try:
            path.write_bytes(kept[1])
        except OSError as exc:
            refused.append(OwnFileRefused(f"cannot write the benchmark's record of the run {path}: {exc}"))


def _teardown_logged(provider: SandboxProvider, sandbox: Sandbox) -> None:
    """A failed removal must not cost the instance its result: log it; the leak audit counts it."""
    try:
        provider.teardown(sandbox)
    except Exception as exc:  # noqa: BLE001
        log.warning("could not remove sandbox %s: %s", sandbox.name, exc)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def salvage(result: AgentResult, trace: TraceFacts, *, usage_too: bool = True) -> AgentResult:
    """Recover the last message and tool calls (and, after a kill, usage) from the trace's own events."""
    if usage_too:
        result.usage = trace.usage.model_copy()
    result.final_message = result.final_message or trace.last_message
    result.tool_calls = result.tool_calls or list(trace.tool_calls)
    return result


@dataclass(frozen=True)
class Finished:
    """An instance's row, and the harness's own files the run directory refused on the way (a full
    disk: evaluate.py starts no more instances), first first."""

    row: ResultRow
    refused: tuple[OwnFileRefused, ...] = ()
    stops_run: bool = False  # its error is the run's configuration (HarnessError.stops_run): start no more


def run_instance(instance: Instance, settings_: RunSettings, epoch: int = 1) -> Finished:
    """Never raises (but for KeyboardInterrupt): a bug here costs one row, recorded as kind `harness`."""
    started, t0 = _now(), time.monotonic()
    refused: list[OwnFileRefused] = []
    try:
        row, stops_run = _run_instance(instance, settings_, started, t0, epoch, refused)
        return Finished(row, tuple(refused), stops_run)
    except Exception as exc:  # noqa: BLE001
        if isinstance(exc, OwnFileRefused):
            refused.append(exc)
        error = f"harness failure: {type(exc).__name__}: {exc}"
        result = AgentResult(error_kind="harness", error=error)
        trace_rel = RunDir(settings_.output_dir).trace_name(instance.instance_id, 0, epoch)
        with suppress(OSError):  # a full disk: the row still says it (the trace is then left out)
            (settings_.output_dir / trace_rel).parent.mkdir(parents=True, exist_ok=True)
        tracer = Tracer(settings_.output_dir / trace_rel)
        tracer.emit(ErrorEvent(kind="harness", message=error, traceback=traceback.format_exc()))
        tracer.close()
        kept = trace_rel if tracer.failed is None else None
        row = _finish(instance, settings_, result, 1, started, t0, None, kept, refused, epoch)
        return Finished(row, tuple(refused))


def _request(instance: Instance, settings_: RunSettings, sandbox: Sandbox, trace_path: Path,
             epoch: int, judge_sandbox: Sandbox | None = None) -> AgentRequest:
    turns = None if settings_.replay is None else (turns_for(settings_.replay, instance.instance_id, epoch) or [])
    return AgentRequest(instance=instance, task=instruction(instance, settings_.prompt),
                        later_steps=later_steps(instance, settings_.prompt), agent=settings_.agent,
                        model=settings_.model, limits=instance.limited(settings_.limits), user=settings_.user,
                        sandbox=sandbox.handle(), trace_path=str(trace_path), replay_turns=turns,
                        slots_dir=str(RunDir(settings_.output_dir).scratch / "model-slots"), search=settings_.search,
                        mcp=settings_.mcp, budget=settings_.budget, epoch=epoch, judge=settings_.judge,
                        judge_sandbox=judge_sandbox.handle() if judge_sandbox is not None else None,
                        cache_dir=None if settings_.cache is None else str(settings_.cache.resolve()))


def _copy_files(sandbox: Sandbox, instance: Instance, names: list[str]) -> None:
    """The task's files `names` into the workspace; the sandbox refusing them is not the agent's doing."""
    try:
        sandbox.copy_in(instance.root, names)
    except SandboxOutputLimit as exc:
        raise InputError(f"instance {instance.instance_id}: its files are too large: {exc}") from exc
    except SandboxRequestError as exc:
        raise InfraError(f"sandbox {sandbox.name} refused the task's files: {exc}") from exc


def _run_instance(instance: Instance, settings_: RunSettings, started: str, t0: float, epoch: int,
                  refused: list[OwnFileRefused]) -> tuple[ResultRow, bool]:
    layout = RunDir(settings_.output_dir)
    result, sandbox_name, trace_rel, attempt = AgentResult(), None, None, 0
    trace: TraceFacts | None = None  # the last attempt's trace, read once its agent process ended
    spent = Usage()  # every attempt's tokens count, not just the last one's
    backoff = settings().retry_backoff
    apart = get_benchmark(instance.benchmark).judge_sandbox  # its files go to its judge's sandbox alone
    for attempt in range(1, settings_.max_retries + 2):
        if stopping():
            result = cancelled()
            break
        trace_rel = layout.trace_name(instance.instance_id, attempt, epoch)
        trace_path = settings_.output_dir / trace_rel
        with own_write("the trace", trace_path):
            trace_path.parent.mkdir(parents=True, exist_ok=True)
            trace_path.unlink(missing_ok=True)
        trace = None
        image = settings_.images[instance.image] if instance.image else settings_.image
        wall = instance.limited(settings_.limits).instance_timeout  # --instance-timeout, or the task's own
        spec = SandboxSpec(image=image, run_id=settings_.run_id, instance_id=instance.instance_id,
                           attempt=attempt, writable_root=get_benchmark(instance.benchmark).writable_root,
                           **instance.resources(settings_.sandbox.resources(settings_.network)))
        try:
            with _sandbox(settings_, spec) as sandbox, _judge_sandbox(settings_, spec, instance, apart) as judge:
                sandbox_name = sandbox.name
                _copy_files(sandbox, instance, [] if apart else instance.files)
                ended = run_agent(_request(instance, settings_, sandbox, trace_path, epoch, judge),
                                  wall, layout.scratch, settings_.forks)
                result, trace = ended.result, ended.trace
                if ended.killed:
                    result = salvage(result, trace)
                    result.usage.cost = Price.of(settings_.model).cost(result.usage.model_dump())
                    hung = trace.waiting_on_model()
                    detail = (f"killed at --instance-timeout {wall:g} s" if wall == settings_.limits.instance_timeout
                              else f"killed at the task's own time limit, {wall:g} s")
                    if hung:  # a model that hangs is the model's failure, retried on resume
                        result.limit, result.error_kind, result.error = None, "model", hung
                        detail += " while waiting on the model (the row is a model error)"
                    else:
                        result.limit = "wall_time"
                        judging = judge if judge is not None else sandbox  # where its judge runs
                        result.verdicts = verdicts_after_kill(instance, judging, settings_.judge, settings_.budget)
                    try:
                        append_event(trace_path, LimitEvent(limit="wall_time", detail=detail))
                    except OSError as exc:  # the row says it too
                        refused.append(OwnFileRefused(f"cannot append to the trace {trace_path}: {exc}"))
                elif result.limit or result.error_kind:
                    result = salvage(result, trace, usage_too=False)
                _keep_record(instance, judge if judge is not None else sandbox, trace_path, refused)
        except HarnessError as exc:
            if isinstance(exc, OwnFileRefused):
                refused.append(exc)
            result = AgentResult(error_kind=exc.kind, error=str(exc), retryable=exc.retryable, stops_run=exc.stops_run)
        spent = spent + result.usage
        if not (result.error_kind and result.retryable) or attempt > settings_.max_retries:
            break
        time.sleep(backoff * attempt)
    result.usage = spent
    row = _finish(instance, settings_, result, attempt, started, t0, sandbox_name, trace_rel, refused, epoch, trace)
    return row, result.stops_run


def _finish(instance, settings_: RunSettings, result: AgentResult, attempt, started, t0, sandbox_name,
            trace_rel, refused: list[OwnFileRefused], epoch: int = 1, trace: TraceFacts | None = None) -> ResultRow:
    """The row of an attempt that ended with `result`; `trace` is its trace's facts when read already. A
    verdict the trace refused is added to `refused`. A final message that was a tool call written as
    text (the trace's model_call says so: models/textcalls.py) is no answer (source text_tool_call)."""
    facts = trace if trace is not None or trace_rel is None else read_facts(settings_.output_dir / trace_rel)
    answer, source = extract_answer(result.final_message)
    if facts is not None and answer is not None and (result.final_message or "").strip() in facts.text_calls:
        answer, source = None, "text_tool_call"  # a call wrapped in the answer tag is no answer either
    status: Status = "error" if result.error_kind else ("limit" if result.limit else "ok")
    scores: dict[str, dict] = {}
    correct: bool | None = None
    unscored = unscored_reason(instance.answer)
    if status != "error":
        context = context_for(tool_calls=result.tool_calls, total_tokens=result.usage.total_tokens,
                              steps=result.usage.llm_calls, limits=instance.limited(settings_.limits),
                              question=instance.question, expected_tool_calls=instance.expected_tool_calls,
                              instance_id=instance.instance_id, metadata=instance.metadata, verdicts=result.verdicts)
        scores, correct = score_row(answer, instance.answer, settings_.scorers, context)
    judged_calls = judge_calls(scores)  # out of the row, into the trace
    judged = judge_usage(scores, result.verdicts)
    if settings_.budget is not None:  # the scorers' judge calls count toward --max-cost, never refused (a judge
        RunBudget(settings_.budget).add(judge_usage(scores).cost)  # asked from the instance was, as it was made)
    row = ResultRow(
        instance_id=instance.instance_id, epoch=epoch, attempt=attempt, status=status,
        instance_hash=instance_hash(instance), dataset=settings_.dataset, error_kind=result.error_kind,
        error=result.error, limit=result.limit, answer=answer, answer_source=source, target=instance.answer,
        level=instance.level, correct=correct if status != "error" or unscored is not None else False,
        scores=scores, unscored=unscored,
        usage=result.usage, judge_usage=judged, steps=result.usage.llm_calls, tool_calls=result.tool_calls,
        user_replies=result.user_replies, duration_s=round(time.monotonic() - t0, 3), started_at=started,
        finished_at=_now(), sandbox=sandbox_name, trace=trace_rel, verdicts=result.verdicts,
    )
    if trace_rel is not None and facts is not None:
        trace_path = settings_.output_dir / trace_rel
        row.env_outcomes, row.text_tool_calls = dict(facts.env_outcomes), len(facts.text_calls)
        row.cut_replies = facts.cut_replies
        if settings_.replay is not None:
            row.replay = replay_check(trace_path, facts, turns_for(settings_.replay, instance.instance_id, epoch) or [])
        # the row is kept all the same
        if (verdict := append_verdict(trace_path, row, "run", judged_calls)) is not None:
            refused.append(OwnFileRefused(f"cannot append the verdict to {trace_path}: {verdict}"))
    return row


def replay_check(trace_path: Path, trace: TraceFacts, turns: list[dict]) -> ReplayCheck:
    """A replayed row's tool results against the recording's fingerprints (models/replay.py check_replay);
    each divergence is appended to the trace, before the verdict."""
    check, divergences = check_replay(turns, trace.events)
    append_divergences(trace_path, divergences)
    return check
