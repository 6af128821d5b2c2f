"""The agent's process: one per instance attempt, killable as a whole.

AutoGen's cancellation can hang while a tool runs, so the wall-clock limit is
enforced by the parent killing this process (and then the sandbox). This process
attaches to the parent's sandbox through its service, runs the agent, and writes
a ChildResult as JSON. It exits by itself if its parent dies.

    python -m harness.runner.child REQUEST.json RESULT.json PARENT_PID
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

if __name__ == "__main__":
    # Die with the harness, even if it is SIGKILLed while this process still imports.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if len(sys.argv) > 3 and os.getppid() != int(sys.argv[3]):
        os._exit(1)  # the harness died before the line above took effect

import asyncio
import threading
import time
import traceback
from pathlib import Path

from pydantic import BaseModel, Field

from harness.agents.base import AgentOutcome, Limits
from harness.datasets.model import Instance
from harness.results.model import Usage

EXIT_SANDBOX_DIED = 70


class ChildRequest(BaseModel):
    instance: Instance
    task: str
    agent: str
    model: dict  # ModelSection fields
    limits: dict
    sandbox: dict  # spec, container_id, name, host, port, token
    trace_path: str
    record: bool = False


class ChildResult(BaseModel):
    final_message: str = ""
    messages: int = 0
    tool_calls: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    limit: str | None = None
    error_kind: str | None = None
    error: str | None = None
    turns: list[dict] = Field(default_factory=list)  # model answers, for --record


def _watch_parent() -> None:
    """Belt and braces beside PR_SET_PDEATHSIG: exit once re-parented."""
    parent = int(sys.argv[3]) if len(sys.argv) > 3 else os.getppid()

    def loop() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)  # orphaned: the harness run was killed

    threading.Thread(target=loop, daemon=True).start()


def classify(exc: BaseException) -> str:
    from harness.errors import HarnessError

    if isinstance(exc, HarnessError):
        return exc.kind
    module = type(exc).__module__
    if module.startswith(("openai", "httpx", "autogen_ext.models")):
        return "model"
    return "agent"


def run(request: ChildRequest, result_path: Path) -> int:
    from harness.agents.registry import resolve
    from harness.environments import CodeEnv, Environments, FileEnv
    from harness.environments.trace import Tracer
    from harness.environments.web import WebEnv
    from harness.models.clients import build_client
    from harness.models.config import ModelSection
    from harness.models.metered import BudgetExceeded, Meter
    from harness.sandbox.contract import SandboxSpec
    from harness.sandbox.docker.provider import DockerSandbox

    limits = Limits(**request.limits)
    tracer = Tracer(Path(request.trace_path))
    section = ModelSection(**request.model)
    meter = Meter(max_tokens=limits.max_tokens, max_steps=limits.max_steps,
                  price_in=section.price_input_per_1k, price_out=section.price_output_per_1k,
                  on_call=tracer.event)
    result = ChildResult()

    def finish(code: int) -> int:
        result.usage = Usage(prompt_tokens=meter.prompt_tokens, completion_tokens=meter.completion_tokens,
                             llm_calls=meter.calls, cost=meter.cost)
        if request.record:
            result.turns = meter.turns
        tmp = result_path.with_suffix(".tmp")
        tmp.write_text(result.model_dump_json())
        os.replace(tmp, result_path)
        tracer.close()
        return code

    def sandbox_died(exc: BaseException) -> None:
        # A dead sandbox must not reach the model as ordinary tool output: stop now.
        result.error_kind, result.error = "infra", f"{type(exc).__name__}: {exc}"
        finish(EXIT_SANDBOX_DIED)
        os._exit(EXIT_SANDBOX_DIED)

    box = request.sandbox
    sandbox = DockerSandbox(SandboxSpec(**box["spec"]), box["container_id"], box["name"], box["host"],
                            box["port"], box["token"])
    trace_path = Path(request.trace_path)
    envs = Environments(code=CodeEnv(sandbox, tracer, timeout=limits.command_timeout),
                        file=FileEnv(sandbox, tracer, page_size=limits.page_size),
                        web=WebEnv(sandbox, tracer, screenshots=trace_path.with_name(trace_path.stem + "-shots"),
                                   page_size=limits.page_size),
                        on_fatal=sandbox_died)
    envs.publish()
    outcome = AgentOutcome()
    try:
        client = build_client(section, meter, request.instance.instance_id)
        factory = resolve(request.agent)
        tracer.event({"type": "task", "task": request.task})
        outcome = asyncio.run(_run_and_close(lambda: factory(client, envs, request.instance, limits),
                                             request.task, tracer, envs))
    except BudgetExceeded as exc:
        result.limit = exc.limit
        tracer.event({"type": "limit", "limit": exc.limit, "detail": str(exc)})
    except Exception as exc:  # noqa: BLE001 - classified and recorded, never lost
        if meter.exceeded:
            result.limit = meter.exceeded
            tracer.event({"type": "limit", "limit": meter.exceeded, "detail": str(exc)})
            return finish(0)
        result.error_kind, result.error = classify(exc), f"{type(exc).__name__}: {exc}"
        tracer.event({"type": "error", "kind": result.error_kind, "traceback": traceback.format_exc()})
    result.final_message = outcome.final_message
    result.messages, result.tool_calls = outcome.messages, outcome.tool_calls
    return finish(0)


async def _run_and_close(make_agent, task, tracer, envs) -> AgentOutcome:
    """Build the agent (a factory may be async, e.g. to take the browser's Playwright context), run it."""
    import inspect

    from harness.agents.autogen.run import run_autogen

    try:
        agent = make_agent()
        if inspect.isawaitable(agent):
            agent = await agent
        return await run_autogen(agent, task, tracer)
    finally:
        await envs.web.close()


def main() -> None:
    _watch_parent()
    request = ChildRequest.model_validate_json(Path(sys.argv[1]).read_text())
    sys.exit(run(request, Path(sys.argv[2])))


if __name__ == "__main__":
    main()
