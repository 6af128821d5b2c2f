"""The run's MCP servers checked once before the first instance: a server that cannot serve fails the run.

`check_servers(servers, provider, spec, instance, log)` starts one sandbox of `spec` (the run's
image, resources and network policy), copies the first selected instance's files into its
/workspace (a server shipped as a task file starts as it would in an instance), starts and
initialises every stdio server in it and lists its tools; every `url` server is reached from the
host the way an agent's process reaches it (its key headers from the host's environment) and its
tools listed. The sandbox is removed before this returns, whatever happened.

A server that does not start, initialise or list its tools is an InputError naming it with the end
of its stderr or the HTTP error (exit 2, before any instance, no row and no run.json written); each
good server is one line on `log`: its tool names as the agents get them. A server that fails later,
in an instance, is still that instance's infra error (harness/environments/mcp_bridge.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from harness.datasets.model import Instance
from harness.environments.mcp_config import McpServer
from harness.errors import InputError
from harness.sandbox.contract import Sandbox, SandboxProvider, SandboxSpec


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
            asyncio.run(_list(stdio, sandbox, log))
        finally:
            provider.teardown(sandbox)
    asyncio.run(_list([s for s in servers if s.url is not None], None, log))


async def _list(servers: list[McpServer], sandbox: Sandbox | None, log: Callable[[str], None]) -> None:
    from harness.environments.mcp_bridge import McpServerFailed
    from harness.environments.mcp_tools import list_server_tools

    for server in servers:
        try:
            names = await list_server_tools(server, sandbox)
        except McpServerFailed as exc:
            where = "in a sandbox of the run's image" if server.command is not None else "from this host"
            raise InputError(f"{exc} (the preflight, {where}, before any instance)") from None
        log(f"{server.where()}: {len(names)} tool(s): {', '.join(names) or '(none)'}")
