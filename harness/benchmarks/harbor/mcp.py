"""The MCP servers a Harbor task declares (`[[environment.mcp_servers]]` of task.toml: name, transport, command and
args, or url and headers; Harbor 0.25's MCPServerConfig), offered to its agent as the harness's MCP tools
(`SERVER__TOOL`: harness/environments/mcp_config.py, the instance's own servers beside the run's --mcp ones, a
run's server of the same name taking the task's place, as Harbor's agent configuration does).

Where a server runs follows Harbor, whose agent runs inside the task's container and starts or reaches each
server from there:
- "stdio" (`command` and `args`): started inside the task's sandbox, as the agent's user, for each agent run (a
  multi-step task's step starts it afresh) and ended with the agent's other processes before the verifier runs;
  it uses what the task's image holds. This is how the harness runs any stdio server (mcp_bridge.py).
- "sse", "streamable-http" (or "http") with a `url`: refused (exit 2, naming task.toml and the key). Harbor's
  agent reaches the url from inside the task's container: a server beside it (a docker-compose service, which
  the harness does not run: one sandbox is one container), or one on the network, reached through the task's
  network policy. The harness reaches a url server from the host, outside that policy, and speaks streamable
  HTTP alone; serving a url server as Harbor does would need a client inside the sandbox.

A server's name becomes its tools' prefix, so it must be a harness MCP name (letters, digits, `_` and `-`, at
most 32, starting with a letter or digit); another is refused, as are two servers of one name.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.environments.mcp_config import NAME_PATTERN


class McpServerConfig(BaseModel):
    """One [[environment.mcp_servers]] table, with Harbor's defaults."""

    model_config = ConfigDict(extra="forbid")

    name: str
    transport: Literal["stdio", "sse", "streamable-http", "http"] = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    headers: dict[str, str] = Field(default_factory=dict)


def servers(declared: list[McpServerConfig]) -> tuple[list[dict[str, Any]], list[str]]:
    """The task's servers as the harness's (McpServer fields), and what of them cannot be served."""
    found: list[dict[str, Any]] = []
    problems: list[str] = []
    seen: set[str] = set()
    for index, server in enumerate(declared):
        where = f"environment.mcp_servers[{index}] ({server.name!r})"
        transport = "streamable-http" if server.transport == "http" else server.transport
        if transport != "stdio":
            problems.append(f"{where}.transport {transport!r} (url {server.url!r}) is not supported: Harbor's agent "
                            "reaches a url server from inside the task's container (a docker-compose service or the "
                            "task's network), the harness only from the host; a stdio server (command) is")
        elif not server.command:
            problems.append(f"{where}.command: a stdio server needs its command")
        elif server.headers:
            problems.append(f"{where}.headers: headers are for a url server, not a stdio one")
        if not re.fullmatch(NAME_PATTERN, server.name):
            problems.append(f"{where}.name: a server's name prefixes its tools' names, so it is letters, digits, _ "
                            "and - (at most 32, starting with a letter or digit)")
        elif server.name in seen:
            problems.append(f"{where}.name: a server of that name comes before it")
        seen.add(server.name)
        if transport == "stdio" and server.command:
            found.append({"name": server.name, "command": server.command, "args": list(server.args)})
    return (found if not problems else []), problems
