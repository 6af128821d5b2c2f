"""The run's MCP servers checked once before the first instance: a server that cannot serve fails the run.

`check_servers(servers, provider, spec, instance, log)` starts one sandbox of `spec` (the run's
image, resources and network policy), copies the first selected instance's files into its
/workspace (a server shipped as a task file starts as it would in an instance), starts and
initialises every stdio server in it and lists its tools; every `url` server is reached from the
host the way an agent's process reaches it (its key headers from the host's environment) and its
tools listed. The sandbox is removed before this returns, whatever happened.

A server that does not start, initialise or list its tools is an InputError naming it with the end
of its stderr or the HTTP error (exit 2, before any instance, no row and no run.json written); each
good server is one line on `log`: its tool names as the agents get them. Each server's whole check
(connect, list, close) has its `timeout` and CLOSE_GRACE_S more, in a thread of its own that is left
behind when it overruns: a server that trickles its replies (a byte every few seconds keeps every read
alive) or never ends the session's DELETE at close held the preflight 277 s past a 120 s timeout, as
the SDK's own request timeout does not cover closing. A server that fails later,
in an instance, is still that instance's infra error (harness/environments/mcp_bridge.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

from harness.datasets.model import Instance
from harness.environments.mcp_config import McpServer
from harness.errors import InputError
from harness.sandbox.contract import Sandbox, SandboxProvider, SandboxSpec

CLOSE_GRACE_S = 2.0  # past a server's timeout, for its own timeout error to come back with the connection closed


def check_servers(servers: Sequence[McpServer], provider: SandboxProvider, spec: SandboxSpec,
                  instance: Instance | None, log: Callable[[str], None]) -> None:
    """List every server's tools (stdio ones in one sandbox of `spec`); InputError naming a server that fails."""
    if not servers:
        return
    stdio = [s for s in servers if s.command is not None]
    if stdio:
        sandbox = provider.start(spec)
        try:
            if instance is not None and instance.files:
                sandbox.copy_in(instance.root, instance.files)
            for server in stdio:
                _check(server, sandbox, log)
        finally:
            provider.teardown(sandbox)
    for server in servers:
        if server.url is not None:
            _check(server, None, log)


def _check(server: McpServer, sandbox: Sandbox | None, log: Callable[[str], None]) -> None:
    """One server's tools listed within its timeout (module docstring); InputError naming it otherwise."""
    from harness.environments.mcp_bridge import McpServerFailed
    from harness.environments.mcp_tools import list_server_tools

    ended: list[list[str] | BaseException] = []

    def listing() -> None:
        try:
            ended.append(asyncio.run(list_server_tools(server, sandbox)))
        except BaseException as exc:  # noqa: BLE001 - carried to the caller's thread
            ended.append(exc)

    where = "in a sandbox of the run's image" if server.command is not None else "from this host"
    thread = threading.Thread(target=listing, name=f"mcp-preflight-{server.name}", daemon=True)
    thread.start()
    thread.join(server.timeout + CLOSE_GRACE_S)
    if not ended:
        raise InputError(f"{server.where()} did not finish its tool listing within its timeout of {server.timeout:g} s "
                         f"(the preflight, {where}, before any instance): it answers too slowly or never ends a "
                         "reply; raise its timeout if it is only slow")
    if isinstance(ended[0], McpServerFailed):
        raise InputError(f"{ended[0]} (the preflight, {where}, before any instance)") from None
    if isinstance(ended[0], BaseException):
        raise ended[0]
    log(f"{server.where()}: {len(ended[0])} tool(s): {', '.join(ended[0]) or '(none)'}")
