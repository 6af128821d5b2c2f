"""The instance's tools, served to the agent program as an MCP server (`$HARNESS_MCP_URL`, streamable HTTP).

The tools are those the plain runner offers the same instance (environments/tools.py `offered`: for a
Gaia2 instance its scenario's apps alone), with their names, descriptions and schemas. The server is
the `mcp` package's low-level one, stateless and answering in JSON (one request, one answer: what the
relay carries; a GET, which would open a stream the relay cannot carry, is answered 405 as MCP
allows), called in the agent's event loop, where the tools live: the runner hands it each
relayed request whose path is under MCP_PATH (the others go to the model proxy), after checking the
instance's token as the proxy does. No port is opened for it.

A call runs the tool function as the plain runner does (`Toolbox.run`: arguments checked, a failing
tool's error told to the caller, a dead sandbox stops the instance: `stopped`) and is traced: a call
the model asked for (a reply's tool call, waiting in the proxy's `asked`) gets its `tool_result` under
that call's id; any other call is traced as a `tool_call` of source `sandbox` with its `tool_result`, and is a
step of its own against --max-steps (models/meter.py `tool_step`: the plain runner's tool calls come only from
its model calls): past the limit it is refused and the instance ends as a `max_steps` limit (`stopped`).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from harness.agents.sandboxed.proxy import SOURCE, authorized
from harness.environments.family import Tool
from harness.environments.tools import Toolbox, schema
from harness.errors import HarnessError, InfraError, LimitExceeded
from harness.models.meter import Meter
from harness.traces import ToolCall, ToolResult, Tracer

MCP_PATH = "/mcp"
PASSED = ("content-type", "accept", "mcp-protocol-version", "mcp-session-id", "last-event-id")  # to the server
KEPT = ("content-type", "mcp-session-id")  # of its answers, to the agent


def served(path: str) -> bool:
    """Whether a relayed request's path is the tool server's."""
    route = path.split("?", 1)[0].rstrip("/")
    return route == MCP_PATH or route.startswith(MCP_PATH + "/")


class ToolServer:
    """One instance's tools over MCP; `start` and `close` inside the agent's event loop."""

    def __init__(self, tools: list[Tool], token: str, tracer: Tracer | None, asked: list[ToolCall],
                 meter: Meter | None = None):
        self.toolbox, self.token, self.tracer, self.asked, self.meter = Toolbox(tools), token, tracer, asked, meter
        self.stopped: HarnessError | None = None  # a dead sandbox or a limit met by a call: the instance ends
        self.definitions = [schema(fn) for fn in self.toolbox.tools.values()]  # OpenAI-style, as the trace has them
        self._listed = [types.Tool(name=d["function"]["name"], description=d["function"]["description"],
                                   input_schema=d["function"]["parameters"]) for d in self.definitions]
        manager = StreamableHTTPSessionManager(Server("harness", on_list_tools=self._list, on_call_tool=self._call),
                                               json_response=True, stateless=True)
        self._manager = manager
        self._client = httpx.AsyncClient(transport=httpx.ASGITransport(manager.handle_request),
                                         base_url="http://127.0.0.1")
        self._end = asyncio.Event()
        self._running: asyncio.Task[None] | None = None
        self._own = itertools.count(1)  # numbers the program's own calls

    async def start(self) -> None:
        ready = asyncio.Event()

        async def hold() -> None:
            async with self._manager.run():
                ready.set()
                await self._end.wait()

        self._running, started = asyncio.ensure_future(hold()), asyncio.ensure_future(ready.wait())
        await asyncio.wait({self._running, started}, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        if self._running.done():
            self._running.result()  # it failed to start: raised here

    async def close(self) -> None:
        self._end.set()
        if self._running is not None:
            await self._running
        await self._client.aclose()

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """One relayed request (relay.py's form: method, path, headers, body as bytes); its answer in the
        same form."""
        headers = {k.lower(): v for k, v in request["headers"].items()}
        if not authorized(headers, self.token):
            return {"status": 401, "headers": {"content-type": "application/json"},
                    "body": b'{"error": {"message": "this server takes the instance\'s token only"}}'}
        if request["method"] != "POST":  # no stream to open (GET), no session to end (DELETE)
            return {"status": 405, "headers": {"content-type": "application/json", "allow": "POST"},
                    "body": b'{"error": {"message": "POST only: this server answers each request in JSON"}}'}
        response = await self._client.request(request["method"], request["path"], content=request["body"],
                                              headers={k: v for k, v in headers.items() if k in PASSED})
        return {"status": response.status_code, "headers": {k: v for k, v in response.headers.items() if k in KEPT},
                "body": response.content}

    async def _list(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._listed)

    async def _call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        call = next((c for c in self.asked if c.name == params.name and c.arguments == arguments), None)
        if call is not None:
            self.asked.remove(call)
        else:  # not a call a reply asked for: the program's own, a step of its own
            if self.stopped is not None:
                return _refused(f"the instance has ended: {self.stopped}")
            try:
                if self.meter is not None:
                    self.meter.tool_step()
            except LimitExceeded as exc:
                self.stopped = exc
                return _refused(f"{exc}: this tool call is refused and the instance ends")
            call = ToolCall(source=SOURCE, name=params.name, arguments=arguments, call_id=f"mcp-{next(self._own)}")
            self._emit(call)
        try:
            content, is_error = await self.toolbox.run(params.name, arguments)
        except InfraError as exc:
            self.stopped = exc
            content, is_error = f"Error: the sandbox is gone: {exc}", True
        except LimitExceeded as exc:  # a paid tool's call past a budget (models/meter.py `paying`)
            self.stopped = exc
            content, is_error = f"Error: {exc}: the instance ends", True
        self._emit(ToolResult(name=params.name, call_id=call.call_id, content=content, is_error=is_error))
        return types.CallToolResult(content=[types.TextContent(type="text", text=content)], is_error=is_error)

    def _emit(self, event: ToolCall | ToolResult) -> None:
        if self.tracer is not None:
            self.tracer.emit(event)


def _refused(why: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"Error: {why}")], is_error=True)
