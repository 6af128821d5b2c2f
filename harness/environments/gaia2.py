"""A Gaia2 scenario's tools: ARE runs the scenario in the instance's sandbox (the gaia2 image's driver,
images/gaia2/gaia2_driver.py) and serves its apps over MCP on stdio, reached through the MCP bridge like any
command server (environments/mcp_bridge.py).

The agent gets the apps' tools under ARE's own names and schemas (`Emails__send_email`); each call is traced
like an MCP tool's. The driver's `harness__` tools are never offered: the first user message is consumed when
the scenario starts (the agent's task is that message already), `event` serves the oracle agent
(harness/agents/oracle/), and once the agent's turns are over `finish` asks ARE's judge for its verdict,
which the instance's result carries to the `gaia2` scorer (scoring/gaia2.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.environments import Environments
from harness.environments.family import SchemaTool, Tool
from harness.environments.mcp_config import McpServer

T = TypeVar("T")
DRIVER = ("/opt/are/bin/python", "/opt/harness/gaia2_driver.py")
HIDDEN = "harness__"
TIMEOUT_S = 180.0  # one call; a message to the user waits for the user's next turn (the driver's TURN_WAIT_S)


@dataclass
class Gaia2Env:
    scenario: str  # the scenario file's path in the sandbox
    tools: list[Tool] = field(default_factory=list)  # filled once the driver runs (`serving`)
    verdict: dict[str, Any] | None = None  # ARE's, once the agent's turns are over
    _hidden: Callable[[str, dict], Awaitable[str]] | None = None

    def server(self) -> McpServer:
        return McpServer(name="gaia2", command=DRIVER[0], args=(DRIVER[1], self.scenario), timeout=TIMEOUT_S)

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
            session = await connect(stack, server, envs.code.sandbox, envs.on_fatal)

            async def hidden(name: str, arguments: dict) -> str:
                return result_text(await session.call_tool(name, arguments, read_timeout_seconds=TIMEOUT_S))

            env._hidden = hidden
            listed = (await session.list_tools()).tools
            env.tools = [SchemaTool(tool.name, tool.description or tool.name, object_schema(tool.input_schema),
                                    caller(server, session, tool.name, tool.name, envs.code.tracer, None))
                         for tool in listed if not tool.name.startswith(HIDDEN)]
            await hidden("harness__task", {})  # the first user message: the agent's task already
            result = await work()
            env.verdict = json.loads(await hidden("harness__finish", {}))
            return result
    except BaseExceptionGroup as group:  # the transport's task group wraps what the agent raised
        raise sole(group) from None
