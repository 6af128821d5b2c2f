"""The agent's process: one per instance attempt, killable as a whole.

AutoGen's cancellation can hang while a tool runs, so the wall-clock limit is
enforced by the parent killing this process (and then the sandbox). This process
reads an AgentRequest, attaches to the parent's sandbox by its handle, drives the
agent's runner turn by turn (the simulated user answers turns that end without an
answer), and writes an AgentResult as JSON. It dies with the process that started it
(runner/agent_process/lifeline.py): a fresh one is given its parent's pid on its command line, a
fork of the fork server calls `run` after the server's own `die_with` for it.

    python -m harness.runner.agent_process.child REQUEST.json RESULT.json PARENT_PID
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # Die with the harness, even if it is SIGKILLed while this process still imports.
    from harness.runner.agent_process.lifeline import die_with

    die_with(int(sys.argv[3]), watch=True)

import asyncio
import contextlib
import traceback
from collections.abc import Awaitable
from pathlib import Path

from harness.agents.contract import AgentContext, AgentRequest, AgentResult, AgentRunner

# every built-in family, preloaded with this module
from harness.environments.families import environments, metering, serving, verdicts
from harness.errors import ErrorKind, HarnessError, LimitExceeded, SandboxDiskLimit
from harness.fsutil import write_atomic
from harness.text import model_json

EXIT_SANDBOX_DIED = 70
# The harness's own disk refused the trace or the result file: the harness's failure (OwnFileRefused in the
# parent, which stops the run), never the agent's; a result written all the same says which file and why.
EXIT_CANNOT_WRITE = 71


# What run() imports as it starts (not at this module's import): the agents' fork server imports them once before
# it forks (forkserver.py `preload`), so that no forked agent process imports them again.
PRELOAD = ("harness.agents.registry", "harness.agents.user", "harness.models.budget", "harness.models.cache",
           "harness.models.meter", "harness.sandbox.registry", "harness.traces", "harness.usage",
           "concurrent.futures.thread")  # asyncio.to_thread's executor: the environments' calls


def run(request: AgentRequest, result_path: Path) -> int:
    from harness.agents.registry import resolve
    from harness.agents.user import reply_function
    from harness.models.budget import RunBudget
    from harness.models.cache import ResponseCache
    from harness.models.meter import Meter
    from harness.sandbox.registry import attach
    from harness.traces import ErrorEvent, LimitEvent, TaskEvent, Tracer
    from harness.usage import Price

    limits = request.limits
    section = request.section()
    trace_path = Path(request.trace_path)
    tracer = Tracer(trace_path)
    meter = Meter(max_tokens=limits.max_tokens, max_steps=limits.max_steps, price=Price.of(section), tracer=tracer,
                  max_cost=limits.max_instance_cost, budget=RunBudget(request.budget) if request.budget else None,
                  call_deadline=section.call_deadline(limits.instance_timeout), request_timeout=section.timeout,
                  cache=ResponseCache(request.cache_dir, request.epoch) if request.cache_dir else None)
    result = AgentResult()

    def finish(code: int) -> int:
        result.usage = meter.usage()
        result.tool_calls = list(tracer.tool_calls)
        refused = tracer.failed is not None
        if refused:  # the harness's own disk refused the trace: not the agent's failure
            own = f" (the attempt's own outcome: {result.error})" if result.error else ""
            result.error_kind, result.retryable = "harness", False
            result.error = f"the harness could not write the trace {trace_path}: {tracer.failed}{own}"
        tracer.close()
        # Atomic (a kill mid-write leaves no torn result), not durable: the harness reads it at once,
        # and after a machine crash the instance runs again anyway.
        try:
            write_atomic(result_path, model_json(result), durable=False)
        except OSError as exc:
            with contextlib.suppress(OSError):  # stderr may live on the same full disk
                print(f"the harness could not write the agent's result {result_path}: {exc}", file=sys.stderr)
            return EXIT_CANNOT_WRITE
        return EXIT_CANNOT_WRITE if refused else code

    def sandbox_died(exc: BaseException) -> None:
        # A dead sandbox must not reach the model as ordinary tool output: stop now.
        # Its kind says whose fault: infra (retried), or the agent's when its code used the sandbox up
        # (SandboxExhausted: OOM-killed, not retried).
        if isinstance(exc, SandboxDiskLimit):  # a limit the agent's code reached, as the wall-clock one
            result.limit = exc.limit
            tracer.emit(LimitEvent(limit=exc.limit, detail=str(exc)))
            os._exit(finish(0))
        kind = exc.kind if isinstance(exc, HarnessError) else "infra"
        retryable = exc.retryable if isinstance(exc, HarnessError) else True
        result.error_kind, result.error, result.retryable = kind, f"{type(exc).__name__}: {exc}", retryable
        tracer.emit(ErrorEvent(kind=kind, message=result.error))
        os._exit(finish(EXIT_SANDBOX_DIED))

    shots = trace_path.with_name(trace_path.stem + "-shots")  # screenshots and given pictures, beside the trace
    judge_sandbox = attach(request.judge_sandbox) if request.judge_sandbox is not None else None
    setup = request.setup(attach(request.sandbox), tracer, shots, judge_sandbox)
    runner: AgentRunner | None = None
    envs = None
    tracer.emit(TaskEvent(task=request.task))
    try:
        runner_class = resolve(request.agent)  # first: a plug-in agent's module may define a tool family
        envs = environments(setup, on_fatal=sandbox_died)
        envs.publish()
        metering(envs, meter, request.instance)
        context = AgentContext(task=request.task, instance=request.instance, limits=limits, model=section,
                               meter=meter, tracer=tracer, envs=envs, replay_turns=request.replay_turns,
                               trace_dir=trace_path.parent)
        runner = first = runner_class()
        reply = reply_function(request.user)
        tasks, started = [request.task, *request.later_steps], 0

        def step() -> Awaitable[None]:
            """The agent run of the instance's next step (one unless it has more: each later one a fresh runner)."""
            nonlocal runner, started
            if started == len(tasks):
                raise RuntimeError(f"a tool family asked for a step past the instance's {len(tasks)}")
            task, started = tasks[started], started + 1
            now = first if started == 1 else runner_class()
            if started > 1:  # a recording's turns go on where the steps before left them (one per model call)
                tracer.emit(TaskEvent(task=task))
                context.task = task
                if request.replay_turns is not None:
                    context.replay_turns = request.replay_turns[meter.calls:]
            runner = now
            return _drive(now, context, task, request, reply, result)

        asyncio.run(serving(setup, envs, step))
        if meter.refused is not None:  # a reply that could not be priced, answered as an error where it came
            raise meter.refused
        result.verdicts = verdicts(envs, request.instance)
    except Exception as exc:  # noqa: BLE001 - classified and recorded, never lost
        limit = exc.limit if isinstance(exc, (LimitExceeded, SandboxDiskLimit)) else meter.exceeded
        if limit and meter.refused is None:
            result.limit = limit
            gone = isinstance(exc, SandboxDiskLimit)  # a sandbox ended past its disk limit cannot judge
            result.verdicts = verdicts(envs, request.instance) if envs is not None and not gone else {}  # as it stood
            tracer.emit(LimitEvent(limit=limit, detail=str(exc)))
            return finish(0)
        kind = result.error_kind = _kind(runner, exc, meter)
        result.error = f"{type(exc).__name__}: {exc}"
        result.retryable = isinstance(exc, HarnessError) and exc.retryable
        cause = meter.refused or exc  # an unpriced reply is the run's configuration, whatever raised
        result.stops_run = isinstance(cause, HarnessError) and cause.stops_run
        if exc is not meter.model_failure:  # the meter traced that one where it happened
            tracer.emit(ErrorEvent(kind=kind, message=result.error, traceback=traceback.format_exc()))
    return finish(0)


def _kind(runner: AgentRunner | None, exc: BaseException, meter) -> ErrorKind:
    """The runner classifies; an agent-looking error after a failed model call is the model's
    (teams re-raise a member's ModelError under their own types)."""
    if runner is None:
        return "harness"
    if meter.refused is not None:  # a reply that could not be priced: the run's configuration, whatever raised
        return "input"
    kind = runner.classify(exc)
    return "model" if kind == "agent" and meter.model_failure is not None else kind


async def _drive(runner: AgentRunner, ctx: AgentContext, task: str, request: AgentRequest, reply,
                 result: AgentResult) -> None:
    """The task, then a simulated user's reply to each turn that ends without <solution>, for an instance of a
    benchmark whose agents answer in text (`Benchmark.user`; one whose agent ends by acting is never nudged)."""
    from harness.agents.user import wants_reply
    from harness.benchmark import get
    from harness.traces import UserReply

    try:
        await runner.setup(ctx)
        if (offered := runner.tools_offered()) is not None:
            ctx.tracer.emit(offered)
        result.final_message = await runner.turn(task)
        replies = request.user.max_replies if get(request.instance.benchmark).user else 0
        while wants_reply(result.final_message) and result.user_replies < replies:
            if ctx.model.kind == "replay" and ctx.meter.calls >= len(request.replay_turns or []):
                break  # a recording with no answers left cannot take a reply
            answer = reply(result.final_message, request.instance, result.user_replies + 1)
            if not answer:
                break
            result.user_replies += 1
            ctx.tracer.emit(UserReply(number=result.user_replies, content=answer))
            result.final_message = await runner.turn(answer) or result.final_message
    finally:
        await runner.close()


def main(request_path: str, result_path: str) -> None:
    request = AgentRequest.model_validate_json(Path(request_path).read_text())
    sys.exit(run(request, Path(result_path)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
