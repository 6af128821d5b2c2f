"""The run's MCP servers as the agent's tools: connected once per agent process, offered to every runner.

`serving_mcp(servers, envs, work, into, images)` connects every server of the configuration (a `command` one
started inside the instance's sandbox through harness/environments/mcp_bridge.py, a `url` one over
streamable HTTP from the host, its key headers read from the host's environment here), lists their
tools into `into` (the MCP family's environment: families/mcp.py), awaits `work` (the agent's turns)
and disconnects. A server that cannot be
started, initialised or listed is McpServerFailed naming it (infra: the preflight checked it
starts, so the instance is retried on a fresh sandbox).

Each MCP tool becomes a `SchemaTool` named `SERVER__TOOL` (characters a model API refuses replaced
by `_`, at most 64), carrying the server's own JSON schema and description, so the plain runner
sends it as is and AutoGen wraps it as a tool of that schema (agents/autogen/tools.py). A call is
one `env` trace event (env "mcp", action the tool's full name; args: server, tool, arguments;
outcome ok / error / timeout) and its text result is cut at MAX_RESULT_CHARS. An image part of a
result is shown to a vision model as view_image's pictures are (bounded in the sandbox, kept beside
the trace, its caption in the result: environments/images.py `ImageEnv.given`); a model that cannot
see reads `[image content: MIME]` in its place. A `url` server's answer is read through
environments/mcp_http.py's bounded client: one over MAX_MESSAGE_BYTES is never held whole, and the call
is the tool's error at once, saying so and its size (as a stdio server's is cut in the sandbox). A result the server
marks as an error (not one the bridge cut for its size: mcp_bridge.py), a timeout (the server's
`timeout`, 120 s by default) or a server that has exited
is told to the model as the tool's error; the agent goes on without it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar

from harness.environments import Environments
from harness.environments.family import SchemaTool, Tool
from harness.environments.images import ImageEnv
from harness.environments.mcp_config import McpServer
from harness.errors import InfraError, InputError
from harness.sandbox.contract import Sandbox
from harness.traces import EnvAction, Tracer

if TYPE_CHECKING:  # the SDK takes a second to import: only an agent process with servers imports it
    from mcp import ClientSession
    from mcp import types as mcp_types

MAX_RESULT_CHARS = 20_000  # of one tool result shown to the model; the rest is cut, and said so
SEPARATOR = "__"
T = TypeVar("T")
Shower = Callable[["mcp_types.ImageContent", str], Awaitable[str]]  # an image part, its label -> its caption


class McpToolError(Exception):
    """The server answered a call with an error, or could not answer it: told to the model."""


async def serving_mcp(servers: tuple[McpServer, ...] | list[McpServer], envs: Environments,
                      work: Callable[[], Awaitable[T]], into: list[Tool], images: ImageEnv | None = None) -> T:
    """Connect `servers`, put their tools in `into`, await `work()`, disconnect. `images`: a vision model's
    pictures, where a tool's image parts are shown (None: the model sees text only)."""
    if not servers:
        return await work()
    try:
        async with AsyncExitStack() as stack:
            for server in servers:
                session = await connect(stack, server, envs.code.sandbox, envs.on_fatal)
                into.extend(await _tools(server, session, envs.code.tracer, taken={t.__name__ for t in into},
                                             show=_shower(images, envs)))
            return await work()
    except BaseExceptionGroup as group:  # the transports' task groups wrap what the agent (or a server) raised
        raise sole(group) from None


def sole(group: BaseExceptionGroup) -> BaseException:
    """The one exception a task group wrapped (through nested groups), so it is classified by its own
    type (a LimitExceeded stays a limit); a group of several stays the group."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
        inner = inner.exceptions[0]
    return inner


async def list_server_tools(server: McpServer, sandbox: Sandbox | None) -> list[str]:
    """The names of one server's tools as the agent would see them (the preflight's check,
    harness/environments/mcp_preflight.py): a `command` server started in `sandbox`, a `url` one reached
    from here. McpServerFailed (or InputError: a key variable not set) when it cannot be."""
    try:
        async with AsyncExitStack() as stack:
            session = await connect(stack, server, sandbox, None)
            return [tool.__name__ for tool in await _tools(server, session, Tracer(None), taken=set())]
    except BaseExceptionGroup as group:
        raise sole(group) from None


async def connect(stack: AsyncExitStack, server: McpServer, sandbox: Sandbox | None,
                   on_fatal: Callable[[BaseException], None] | None, sampling: Any = None) -> ClientSession:
    """A session with `server`, initialised; `sampling`: the client's answer to the server's sampling requests
    (MCP's sampling/createMessage: a server that asks an LLM through its client; Gaia2's judge)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from harness.environments.mcp_bridge import MAX_MESSAGE_BYTES, McpServerFailed, sandbox_stdio, start_bridge
    from harness.environments.mcp_http import bounded_client

    pipe, refusals = None, list[str]()
    try:
        if server.command is not None:
            assert sandbox is not None, "a command server runs in a sandbox"
            pipe = start_bridge(sandbox, server.name, [server.command, *server.args], server.env)
            read, write = await stack.enter_async_context(sandbox_stdio(pipe, on_fatal))
        else:
            client = await stack.enter_async_context(bounded_client(headers(server)))
            client.event_hooks["response"].append(_noting_refusals(refusals))
            read, write = await stack.enter_async_context(
                streamable_http_client(server.url or "", http_client=client, max_sse_event_size=MAX_MESSAGE_BYTES))
        session = await stack.enter_async_context(ClientSession(read, write, read_timeout_seconds=server.timeout,
                                                                          sampling_callback=sampling))
        await session.initialize()
        return session
    except (InfraError, InputError):  # a dead sandbox, a server that failed to start, a key not set
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to connect is this server's, said with its name
        stderr = f"; its stderr ends: {tail}" if pipe is not None and (tail := pipe.stderr_tail()) else ""
        http = f"; it answered {refusals[0]}" if refusals else ""
        raise McpServerFailed(f"{server.where()} did not start: {_reason(exc)}{stderr}{http}") from exc


def _noting_refusals(into: list[str]) -> Callable[[Any], Awaitable[None]]:
    """An HTTP client's response hook keeping each error status with the start of its body (the SDK
    tells only that the server "returned an error response")."""
    async def note(response: Any) -> None:
        if response.status_code >= 400:
            try:
                body = (await response.aread())[:300].decode(errors="replace").strip()
            except RuntimeError:  # an httpx2 StreamError: a body past the limit (mcp_http.py)
                body = "(its body too large to read)"
            into.append(f"HTTP {response.status_code} {response.reason_phrase}" + (f": {body}" if body else ""))

    return note


def headers(server: McpServer) -> dict[str, str]:
    """A url server's headers, from the host's environment (never written anywhere)."""
    wanted = {**({"Authorization": server.api_key_env} if server.api_key_env else {}), **server.header_env}
    out = {}
    for header, variable in wanted.items():
        value = os.environ.get(variable)
        if not value:
            raise InputError(f"[mcp.{server.name}]: environment variable {variable} (for {header}) is not set")
        out[header] = f"Bearer {value}" if header == "Authorization" and variable == server.api_key_env else value
    return out


async def _tools(server: McpServer, session: ClientSession, tracer: Tracer, taken: set[str],
                 show: Shower | None = None) -> list[Tool]:
    from mcp import types as mcp_types

    from harness.environments.mcp_bridge import McpServerFailed

    listed: list[mcp_types.Tool] = []
    cursor = None
    try:
        while True:
            page = await session.list_tools(params=mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
    except Exception as exc:  # noqa: BLE001
        raise McpServerFailed(f"{server.where()} did not list its tools: {_reason(exc)}") from exc
    tools: list[Tool] = []
    for tool in listed:
        name = _unique(tool_name(server.name, tool.name), taken)
        taken.add(name)
        tools.append(SchemaTool(name, tool.description or tool.title or tool.name, object_schema(tool.input_schema),
                                caller(server, session, tool.name, name, tracer, show)))
    return tools


def tool_name(server: str, tool: str) -> str:
    """`SERVER__TOOL` as model APIs accept function names: [A-Za-z0-9_-], at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}{SEPARATOR}{tool}")[:64]


def _unique(name: str, taken: set[str]) -> str:
    candidate, number = name, 2
    while candidate in taken:
        suffix = f"_{number}"
        candidate, number = name[: 64 - len(suffix)] + suffix, number + 1
    return candidate


def object_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The tool's input schema as a function's parameters: an object, with properties."""
    return {"type": "object", "properties": {}, **(schema or {})}


def caller(server: McpServer, session: ClientSession, tool: str, name: str, tracer: Tracer, show: Shower | None):
    """A server's tool as the agent calls it, traced. What the server answers, an error included, and a call it
    could not answer in time are the model's to read (McpToolError); a command server whose connection closed
    (its process in the sandbox ended) is the instance's infrastructure (McpServerGone). A URL server's closed
    stream stays the model's to read: the harness's own bound on an answer's size closes it too."""
    from mcp import types as mcp_types
    from mcp.shared.exceptions import MCPError

    from harness.environments.mcp_bridge import CUT_KEY, McpServerGone

    async def call(arguments: dict[str, Any]) -> str:
        started = time.monotonic()
        args = {"server": server.name, "tool": tool, "arguments": arguments}
        outcome, error, result, exc = "ok", None, None, None
        try:
            result = await session.call_tool(tool, arguments, read_timeout_seconds=server.timeout)
        except Exception as failed:  # noqa: BLE001 - a timeout, a server gone: said below
            exc = failed
            timed_out = time.monotonic() - started >= server.timeout
            outcome, error = ("timeout" if timed_out else "error"), _reason(exc)
            text = f"{server.where()} could not answer: {error}"
        if result is not None:
            text = result_text(result, await _captions(result, show, name) if show is not None else {})
            if result.is_error and CUT_KEY not in (result.meta or {}):  # a cut answer is the result, not an error
                outcome, error = "error", text
        seconds = round(time.monotonic() - started, 4)
        extra: dict[str, Any] = {"result": text[:4000], **({"error": error[:1000]} if error else {})}
        tracer.emit(EnvAction(env="mcp", action=name, args=args, outcome=outcome, seconds=seconds, **extra))
        if outcome != "ok":
            if server.command is not None and isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
                raise McpServerGone(f"{server.where()} ended while the instance ran: {error}")
            raise McpToolError(text)
        return text

    return call


def _shower(images: ImageEnv | None, envs: Environments) -> Shower | None:
    """How a vision model is shown an MCP tool's image part (None: the model sees text only): bounded in
    the sandbox and kept like view_image's pictures (environments/images.py `ImageEnv.given`), its
    caption in the tool's result so the runner sends the picture after it."""
    if images is None:
        return None

    async def show(block: mcp_types.ImageContent, label: str) -> str:
        try:
            data = base64.b64decode(block.data, validate=True)
            return (await envs.call(images.given, data, label, "mcp_image")).caption
        except ValueError as exc:  # not base64, not an image, too large: said in its place
            return f"[image content not shown: {exc}]"

    return show


async def _captions(result: mcp_types.CallToolResult, show: Shower, name: str) -> dict[int, str]:
    """The caption of each of the result's image parts once shown, by the part's place in the result."""
    from mcp import types as mcp_types

    images = [(index, block) for index, block in enumerate(result.content) if isinstance(block, mcp_types.ImageContent)]
    return {index: await show(block, f"{name} image {number}") for number, (index, block) in enumerate(images, 1)}


def result_text(result: mcp_types.CallToolResult, captions: dict[int, str] | None = None) -> str:
    """A tool result as the model reads it: its text parts, the `captions` of the image parts shown
    (by place), other parts named; cut at MAX_RESULT_CHARS."""
    from mcp import types as mcp_types

    parts = []
    for index, block in enumerate(result.content):
        if captions and index in captions:
            parts.append(captions[index])
        elif isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(f"[{block.type} content: {getattr(block, 'mime_type', '') or 'not shown'}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, default=str))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[... {len(text) - MAX_RESULT_CHARS} more characters cut]"
    return text


def _reason(exc: BaseException) -> str:
    """The innermost cause of a failure (task groups wrap it), as one line."""
    exc = sole(exc) if isinstance(exc, BaseExceptionGroup) else exc
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:500] if str(exc) else type(exc).__name__
