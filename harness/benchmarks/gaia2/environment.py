"""A Gaia2 scenario's tools: ARE runs the scenario in the instance's judge's sandbox (the gaia2 image's driver,
images/gaia2/gaia2_driver.py) and serves its apps over MCP on stdio, reached through the MCP bridge like any
command server (environments/mcp_bridge.py).

The judge's sandbox is a second sandbox of the instance, beside the agent's (runner/instance.py, for a benchmark
whose `judge_sandbox` is set): it alone holds the scenario file, ARE's environment and judge run there, and no
agent code does. The host alone reaches it; an agent program in the agent's sandbox reaches ARE's apps only
through the harness's tools (the tools below, or $HARNESS_MCP_URL for `--agent sandbox:...`), never the driver's
`harness__` control, its memory, its files or its bridge (docs/sandboxes.md, "The judge's sandbox"; the threat
model: docs/reliability.md).

The agent gets the apps' tools under ARE's own names and schemas (`Emails__send_email`); each call is traced
like an MCP tool's. The driver's `harness__` tools are never offered: the first user message is consumed when
the scenario starts (the agent's task is that message already), `event` serves the oracle agent
(harness/agents/oracle/), and once the agent's turns are over `finish` asks ARE's judge for its verdict,
which the instance's result carries to the `gaia2` scorer (benchmarks/gaia2/scorer.py). As ARE's runner
validates every run once its agent stops, its iteration cap included, so here: an agent stopped at a limit
(--max-steps, --max-tokens, a cost) is judged on what it did before the limit is raised on; one killed at its
wall-clock limit is judged by the parent before the judge's sandbox goes (`verdict_after_kill`: a session of its
own on the driver, which outlives the agent's process, within AFTER_KILL_S). Only a driver that cannot answer
leaves a run unjudged.

ARE's soft checks (a message's text compared by an LLM) need a model: with the run's `--judge-model` the driver
runs ARE's LLM judge and asks each of its calls through this MCP session (MCP's sampling: the server asks its
client), answered here on the host by that model's section (models/completion.py). So the judge's key never
enters the sandbox, which has no network anyway; the calls' usage is kept with the verdict (`judge_usage`) and
the row counts it as the judge's. Each call is checked before it is made and counted as it ends by the
instance's meter (models/meter.py `paying`: --max-instance-cost, the run's --max-cost), whoever wrote the request
into the session (ARE's judge, or anything else that reaches it). Without a judge model, ARE's scripted checks
alone judge (`judge: hard`); a request of a kind the run does not have (a judge's without a judge model, an app
agent's outside the agent2agent phase, one of no kind) is refused.

Gaia2's agent2agent phase (`a2a`: the driver's --a2a) makes each app an app agent of ARE's whose model calls come
the same way, their request's metadata saying {"harness": "a2a"}: they are answered with the agent's own model
section (Setup.model) through the agent's own meter (ChatModel, models/meter.py), so they are the agent's calls:
its usage, trace, --max-tokens, --max-steps, --max-instance-cost and the run's --max-cost, as ARE counts an app
agent's model as the agent's. They do not hold ARE's clock (they run inside a tool call; ARE's app agents do not
pause it either).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from harness.benchmarks.gaia2.record import TRACE
from harness.environments import Environments
from harness.environments.family import SchemaTool, Tool
from harness.environments.mcp_config import McpServer
from harness.errors import HarnessError, InputError
from harness.sandbox.contract import Sandbox
from harness.traces import JudgeCall, acting
from harness.usage import Usage

if TYPE_CHECKING:
    from mcp import types

    from harness.models.budget import BudgetSpec
    from harness.models.chat import ChatModel
    from harness.models.completion import Completion
    from harness.models.config import ModelSection
    from harness.models.meter import Meter

log = logging.getLogger(__name__)
T = TypeVar("T")
DRIVER = ("/opt/are/bin/python", "/opt/harness/gaia2_driver.py")
HIDDEN = "harness__"
AFTER_KILL_S = 120.0  # asking ARE's verdict of a killed agent's scenario, its judge's calls included
TIMEOUT_S = 180.0  # one call; a message to the user waits for the user's next turn (the driver's TURN_WAIT_S)
A2A_TIMEOUT_S = 1800.0  # one call in the agent2agent phase: an app agent's whole run, its model calls included
EXPERT = "__expert_agent"  # ARE's app agent's one tool, named APP__expert_agent


@dataclass
class Gaia2Env:
    scenario: str  # the scenario file's path in the judge's sandbox
    sandbox: Sandbox | None  # the instance's judge's sandbox, where ARE runs (None: the dry preflight's, never served)
    judge: ModelSection | None = None  # --judge-model: ARE's soft checks through it; None: scripted checks alone
    noise: bool = False  # Gaia2's noise phase: ARE's tool failures and extra environment events (the driver's --noise)
    a2a: bool = False  # Gaia2's agent2agent phase: ARE's app agents, on the agent's model (the driver's --a2a)
    agent: ModelSection | None = None  # the agent's own model section: the app agents' model
    meter: Meter | None = None  # the agent's meter (Gaia2.metered): the app agents' calls are the agent's
    tools: list[Tool] = field(default_factory=list)  # filled once the driver runs (`serving`)
    verdict: dict[str, Any] | None = None  # ARE's, once the agent's turns are over
    judge_usage: Usage = field(default_factory=Usage)  # what ARE's judge calls cost (`sample`)
    _hidden: Callable[[str, dict], Awaitable[str]] | None = None
    _chat: Callable[[list[dict[str, Any]]], Completion] | None = None  # the judge's completion function, made once
    _agent_chat: ChatModel | None = None  # the app agents' model, made at their first call
    _asked: list[str] = field(default_factory=list)  # the app agents' tools (APP__expert_agent) being called now
    named: str = ""  # the scenario as an error names it: its id and its file on the host
    run_number: int = 1  # the run's epoch: the run_number of ARE's trace of it (benchmarks/gaia2/record.py)

    def server(self) -> McpServer:
        judge = ("--judge", "hard") if self.judge is None else ("--judge", "llm", "--judge-model", self.judge.model)
        phase = ("--noise",) * self.noise + ("--a2a",) * self.a2a
        record = ("--run-number", str(self.run_number), "--trace", TRACE)  # ARE's trace of the run, once judged
        return McpServer(name="gaia2", command=DRIVER[0], args=(DRIVER[1], self.scenario, *judge, *phase, *record),
                         timeout=A2A_TIMEOUT_S if self.a2a else TIMEOUT_S)

    async def pause(self) -> None:
        """ARE's clock stands still while the model generates (models/meter.py `Clock`), as ARE's agents hold it."""
        if self._hidden is not None:
            await self._hidden("harness__pause", {})

    async def resume(self, seconds: float) -> None:
        """ARE's clock goes on, moved by the call's measured seconds (ARE's default, "measured" mode)."""
        if self._hidden is not None:
            await self._hidden("harness__resume", {"offset": seconds})

    async def sample(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | \
            types.ErrorData:
        """One call of ARE's judge (MCP sampling, its metadata {"harness": "judge"}), made by the judge model's
        section on the host through the instance's meter, or of an app agent's (its metadata says {"harness":
        "a2a"}, in an agent2agent run only), made by the agent's model through its meter. A request of a kind
        this run's phase does not have is refused (the agent cannot reach the judge's sandbox; this holds
        whoever writes to the session)."""
        from mcp import types

        messages = [{"role": "system", "content": params.system_prompt}] if params.system_prompt else []
        for message in params.messages:
            parts = message.content if isinstance(message.content, list) else [message.content]
            messages.append({"role": message.role, "content": "\n".join(
                part.text if isinstance(part, types.TextContent) else json.dumps(part.model_dump(mode="json"))
                for part in parts)})
        kind = (params.metadata or {}).get("harness")
        if kind == "a2a" and self.a2a:
            return await self._app_agent(messages)
        if kind != "judge" or self.judge is None or self.meter is None:
            have = " and ".join(["judge"] * (self.judge is not None) + ["a2a"] * self.a2a) or "none"
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"a sampling request of kind {kind!r} is "
                                   f"not one this run's phase has (its kinds: {have})")
        try:
            reply = await asyncio.to_thread(self._judged, messages)
        except HarnessError as exc:  # the judge model's failure, a budget reached, a reply that cannot be priced
            self._traced(messages, error=str(exc))
            return types.ErrorData(code=types.INTERNAL_ERROR, message=str(exc))
        self._traced(messages, reply=str(reply), model=reply.model, fingerprint=reply.fingerprint)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=str(reply)),
                                         model=self.judge.model, stop_reason="endTurn")

    def _judged(self, messages: list[dict[str, Any]]) -> Completion:
        """One judge call, in a thread of its own: checked and counted by the instance's meter (Meter.paying:
        --max-instance-cost, the run's --max-cost) before it is made, its cost in the run's spend at once."""
        from harness.models.completion import chat_completer

        assert self.judge is not None and self.meter is not None
        with self.meter.paying(judge=True) as pay:
            self._chat = self._chat or chat_completer(self.judge)
            reply = self._chat(messages)
            pay(reply.usage)
        self.judge_usage = self.judge_usage + reply.usage
        return reply

    def _traced(self, messages: list[dict[str, Any]], reply: str = "", error: str = "", model: str = "",
                fingerprint: str = "") -> None:
        """One call of ARE's judge, in the instance's trace (an app agent's calls are the meter's model_call)."""
        if self.meter is not None and self.meter.tracer is not None and self.judge is not None:
            self.meter.tracer.emit(JudgeCall(judge="gaia2", model=self.judge.name, messages=messages, reply=reply,
                                             error=error, response_model=model, fingerprint=fingerprint))

    async def _app_agent(self, messages: list[dict[str, Any]]) -> types.CreateMessageResult | types.ErrorData:
        """One call of an app agent's model: the agent's own, through its meter; a failure goes back to ARE's
        app agent as an error (a budget spent stops the agent at its own next call)."""
        from mcp import types

        from harness.models.factory import chat_model

        if self.agent is None or self.meter is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message="the agent has no model for ARE's app agents")
        via = self._asked[0] if len(set(self._asked)) == 1 else None  # ARE does not say which app asks
        try:
            self._agent_chat = self._agent_chat or chat_model(self.agent, self.meter, None)
            with acting(via.removesuffix(EXPERT) if via else "app agent", via):
                reply = await self._agent_chat.complete(messages, [], hold=False)
        except HarnessError as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=str(exc))
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=reply.content),
                                         model=self.agent.model, stop_reason="endTurn")

    def asking(self, name: str, call: Callable[[dict], Awaitable[str]]) -> Callable[[dict], Awaitable[str]]:
        """An app agent's tool (`APP__expert_agent`) noted while its call runs: the app agent's model calls made
        meanwhile are that app's (their trace events' `agent` and `via`); any other tool as it is."""
        if not name.endswith(EXPERT):
            return call

        async def noted(arguments: dict) -> str:
            self._asked.append(name)
            try:
                return await call(arguments)
            finally:
                self._asked.remove(name)
        return noted

    def keep(self, verdict: dict[str, Any]) -> None:
        """ARE's verdict, with what its judge's calls cost when a judge model made them."""
        self.verdict = {**verdict, "judge_usage": self.judge_usage.model_dump()} if self.judge else verdict

    async def event(self, event_id: str) -> dict | None:
        """A happened event's time and return value (None: not yet)."""
        assert self._hidden is not None, "the scenario is not running"
        found: dict | None = json.loads(await self._hidden("harness__event", {"event_id": event_id}))
        return found


async def serving(env: Gaia2Env, envs: Environments, work: Callable[[], Awaitable[T]]) -> T:
    """Start the scenario's driver, fill `env.tools`, await `work()` (the agent's turns), then keep ARE's verdict."""
    from harness.environments.mcp_tools import caller, connect, object_schema, result_text, sole

    if env.sandbox is None:
        raise HarnessError("a Gaia2 scenario runs in its judge's sandbox, and this instance has none")
    server = env.server()
    try:
        async with AsyncExitStack() as stack:
            session = await connect(stack, server, env.sandbox, envs.on_fatal,
                                    sampling=env.sample if env.judge is not None or env.a2a else None)

            async def hidden(name: str, arguments: dict) -> str:
                return result_text(await session.call_tool(name, arguments, read_timeout_seconds=TIMEOUT_S))

            env._hidden = hidden
            refused = json.loads(await hidden("harness__setup", {})).get("refused")
            if refused:  # found by ARE at the driver's start, before the agent's first turn (not retried)
                raise InputError(f"Gaia2 scenario {env.named or env.scenario}: ARE cannot set it up: {refused}")
            listed = (await session.list_tools()).tools
            env.tools = [SchemaTool(tool.name, tool.description or tool.name, object_schema(tool.input_schema),
                                    env.asking(tool.name, caller(server, session, tool.name, tool.name,
                                                                 envs.code.tracer, None)))
                         for tool in listed if not tool.name.startswith(HIDDEN)]
            await hidden("harness__task", {})  # the first user message: the agent's task already

            async def judged() -> None:
                env._hidden = None  # the judging is no model generation: the clock is not held for it
                env.keep(json.loads(await hidden("harness__finish", {})))

            try:
                result = await work()
            except Exception:
                if env.meter is not None and env.meter.exceeded:  # stopped at a limit: judged as it stands
                    await judged()
                raise
            await judged()
            return result
    except BaseExceptionGroup as group:  # the transport's task group wraps what the agent raised
        raise sole(group) from None
    finally:
        if env._agent_chat is not None:
            await env._agent_chat.close()


def verdict_after_kill(sandbox: Sandbox, judge: ModelSection | None, bound: float = AFTER_KILL_S,
                       budget: BudgetSpec | None = None) -> dict | None:
    """ARE's verdict of a scenario whose agent's process was killed (its wall-clock limit), asked on the host of
    the driver that still runs in the judge's `sandbox`: a session of the host's own on the driver's bridge, its
    judge's calls answered here as `sample` answers them (through a meter of their own: the run's --max-cost
    `budget` admits and counts them), within `bound` seconds; None: no driver answered in time."""
    from harness.environments.mcp_bridge import attach_bridge
    from harness.models.budget import RunBudget
    from harness.models.meter import Meter

    async def ask() -> dict | None:
        from mcp import ClientSession

        from harness.environments.mcp_bridge import sandbox_stdio
        from harness.environments.mcp_tools import result_text, sole

        pipe = await asyncio.to_thread(attach_bridge, sandbox, "gaia2")
        if pipe is None:
            return None
        env = Gaia2Env("", sandbox, judge=judge,
                       meter=Meter(max_tokens=None, max_steps=None, budget=RunBudget(budget) if budget else None))
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(sandbox_stdio(pipe))
                session = await stack.enter_async_context(ClientSession(
                    read, write, read_timeout_seconds=bound,
                    sampling_callback=env.sample if judge is not None else None))
                await session.initialize()
                env.keep(json.loads(result_text(await session.call_tool("harness__finish", {}))))
        except BaseExceptionGroup as group:
            raise sole(group) from None
        return env.verdict

    try:
        return asyncio.run(asyncio.wait_for(ask(), bound))
    except Exception as exc:  # noqa: BLE001 - whatever failed, the scenario is then not judged (and counted so)
        log.warning("no verdict of ARE's driver after the agent was killed: %s: %s", type(exc).__name__, exc)
        return None
