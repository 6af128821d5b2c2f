"""A Gaia2 scenario's tools: ARE runs the scenario in the instance's sandbox (the gaia2 image's driver,
images/gaia2/gaia2_driver.py) and serves its apps over MCP on stdio, reached through the MCP bridge like any
command server (environments/mcp_bridge.py).

The agent gets the apps' tools under ARE's own names and schemas (`Emails__send_email`); each call is traced
like an MCP tool's. The driver's `harness__` tools are never offered: the first user message is consumed when
the scenario starts (the agent's task is that message already), `event` serves the oracle agent
(harness/agents/oracle/), and once the agent's turns are over `finish` asks ARE's judge for its verdict,
which the instance's result carries to the `gaia2` scorer (scoring/gaia2.py).

ARE's soft checks (a message's text compared by an LLM) need a model: with the run's `--judge-model` the driver
runs ARE's LLM judge and asks each of its calls through this MCP session (MCP's sampling: the server asks its
client), answered here on the host by that model's section (models/completion.py). So the judge's key never
enters the sandbox, which has no network anyway; the calls' usage is kept with the verdict (`judge_usage`) and
the row counts it as the judge's. Without a judge model, ARE's scripted checks alone judge (`judge: hard`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from harness.environments import Environments
from harness.environments.family import SchemaTool, Tool
from harness.environments.mcp_config import McpServer
from harness.errors import ModelError
from harness.usage import Usage

if TYPE_CHECKING:
    from mcp import types

    from harness.models.config import ModelSection

T = TypeVar("T")
DRIVER = ("/opt/are/bin/python", "/opt/harness/gaia2_driver.py")
HIDDEN = "harness__"
TIMEOUT_S = 180.0  # one call; a message to the user waits for the user's next turn (the driver's TURN_WAIT_S)


@dataclass
class Gaia2Env:
    scenario: str  # the scenario file's path in the sandbox
    judge: ModelSection | None = None  # --judge-model: ARE's soft checks through it; None: scripted checks alone
    noise: bool = False  # Gaia2's noise phase: ARE's tool failures and extra environment events (the driver's --noise)
    tools: list[Tool] = field(default_factory=list)  # filled once the driver runs (`serving`)
    verdict: dict[str, Any] | None = None  # ARE's, once the agent's turns are over
    judge_usage: Usage = field(default_factory=Usage)  # what ARE's judge calls cost (`sample`)
    _hidden: Callable[[str, dict], Awaitable[str]] | None = None
    _chat: Callable[[list[dict[str, Any]]], Any] | None = None  # the judge's completion function, made once

    def server(self) -> McpServer:
        judge = ("--judge", "hard") if self.judge is None else ("--judge", "llm", "--judge-model", self.judge.model)
        noise = ("--noise",) if self.noise else ()
        return McpServer(name="gaia2", command=DRIVER[0], args=(DRIVER[1], self.scenario, *judge, *noise),
                         timeout=TIMEOUT_S)

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
        """One call of ARE's judge (MCP sampling), made by the judge model's section on the host."""
        from mcp import types

        from harness.models.completion import chat_completer

        assert self.judge is not None, "the driver asked for a judge it was not given"
        messages = [{"role": "system", "content": params.system_prompt}] if params.system_prompt else []
        for message in params.messages:
            parts = message.content if isinstance(message.content, list) else [message.content]
            messages.append({"role": message.role, "content": "\n".join(
                part.text if isinstance(part, types.TextContent) else json.dumps(part.model_dump(mode="json"))
                for part in parts)})
        try:
            self._chat = self._chat or chat_completer(self.judge)
            reply = await asyncio.to_thread(self._chat, messages)
        except ModelError as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=str(exc))
        self.judge_usage = self.judge_usage + reply.usage
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=str(reply)),
                                         model=self.judge.model, stop_reason="endTurn")

    async def event(self, event_id: str) -> dict | None:
        """A happened event's time and return value (None: not yet)."""
        assert self._hidden is not None, "the scenario is not running"
        found: dict | None = json.loads(await self._hidden("harness__event", {"event_id": event_id}))
        return found


async def serving(env: Gaia2Env, envs: Environments, work: Callable[[], Awaitable[T]]) -> T:
    """Start the scenario's driver, fill `env.tools`, await `work()` (the agent's turns), then keep ARE's verdict."""
    from harness.environments.mcp_tools import caller, connect, object_schema, result_text, sole

    server = env.server()
    try:
        async with AsyncExitStack() as stack:
            session = await connect(stack, server, envs.code.sandbox, envs.on_fatal,
                                    sampling=env.sample if env.judge is not None else None)

            async def hidden(name: str, arguments: dict) -> str:
                return result_text(await session.call_tool(name, arguments, read_timeout_seconds=TIMEOUT_S))

            env._hidden = hidden
            listed = (await session.list_tools()).tools
            env.tools = [SchemaTool(tool.name, tool.description or tool.name, object_schema(tool.input_schema),
                                    caller(server, session, tool.name, tool.name, envs.code.tracer, None))
                         for tool in listed if not tool.name.startswith(HIDDEN)]
            await hidden("harness__task", {})  # the first user message: the agent's task already
            result = await work()
            env._hidden = None  # the judging below is no model generation: the clock is not held for it
            verdict = json.loads(await hidden("harness__finish", {}))
            env.verdict = {**verdict, "judge_usage": env.judge_usage.model_dump()} if env.judge else verdict
            return result
    except BaseExceptionGroup as group:  # the transport's task group wraps what the agent raised
        raise sole(group) from None
