"""MCP tool servers a run offers its agents: `--mcp NAME=COMMAND` and `[mcp.NAME]` in the models TOML.

    [mcp.calc]                       # a stdio server, started inside each instance's sandbox
    command = "python3"
    args = ["/workspace/calc_server.py"]
    env = { CALC_MODE = "exact" }    # literal values the server gets in the sandbox: never a secret
    timeout = 120                    # seconds one tool call may take (default 120)

    [mcp.docs]                       # a remote streamable-HTTP server, reached from the host
    url = "https://mcp.example.com/mcp"
    api_key_env = "DOCS_MCP_KEY"     # sent as `Authorization: Bearer <the variable's value>`
    header_env = { "X-Api-Key" = "DOCS_KEY" }  # header name -> the variable holding its value

`--mcp NAME=COMMAND` is the stdio form on the command line (COMMAND split as a shell would:
`--mcp calc="python3 /workspace/calc_server.py"`); a name given both ways is refused. Keys of a
remote server are read from the host's environment by the agent's process when it connects and
never enter a sandbox; the configuration holds only the variables' names, so the whole of it is
part of the run's fingerprint (runner/run_config.py). The servers' tools reach the agents as
`NAME__tool` (harness/environments/mcp_tools.py).

An instance may declare servers of its own (its metadata's INSTANCE_KEY: McpServer fields, as a Harbor task's
[[environment.mcp_servers]] become: harness/benchmarks/harbor/mcp.py): its agent gets them beside the run's, a
run's server of the same name taking the place of the instance's (as Harbor's agent configuration does).
"""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import InputError, validation_problems

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$"
DEFAULT_TIMEOUT = 120.0


class McpServer(BaseModel):
    """One MCP server: `command` (stdio, in the sandbox) or `url` (streamable HTTP, from the host)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    api_key_env: str | None = None
    header_env: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0)

    @model_validator(mode="after")
    def _one_kind(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server in the sandbox) or url (a remote server)")
        if self.url is not None and (self.args or self.env):
            raise ValueError("args and env are for a command; a url server takes api_key_env and header_env")
        if self.command is not None and (self.api_key_env or self.header_env):
            raise ValueError("api_key_env and header_env are for a url server (a command runs in the sandbox, "
                             "where no key may go)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must be http:// or https://, not {self.url!r}")
        return self

    def where(self) -> str:
        """How messages name this server."""
        return f"MCP server {self.name!r}"


INSTANCE_KEY = "mcp_servers"  # an instance's metadata key: its own servers, each McpServer's fields


def for_instance(run: tuple[McpServer, ...], instance: Any) -> tuple[McpServer, ...]:
    """The servers an instance's agent gets: its own (INSTANCE_KEY), then the run's; one per name, the run's
    taking the place of the instance's."""
    own = [McpServer.model_validate(raw) for raw in (instance.metadata.get(INSTANCE_KEY) or [] if instance else [])]
    return tuple({server.name: server for server in (*own, *run)}.values())


def from_flag(text: str) -> McpServer:
    """`NAME=COMMAND` (COMMAND split as a shell would) as a stdio server; InputError naming the flag."""
    name, sep, command = text.partition("=")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InputError(f"--mcp {text}: the command cannot be split: {exc}") from None
    if not sep or not argv:
        raise InputError(f"--mcp {text}: expected NAME=COMMAND, e.g. --mcp calc=\"python3 /workspace/server.py\"")
    return _build(f"--mcp {text}", {"name": name.strip(), "command": argv[0], "args": tuple(argv[1:])})


def from_toml(data: dict[str, Any], where: str) -> list[McpServer]:
    """The `[mcp.NAME]` tables of a parsed TOML (`where`: the file, for messages)."""
    tables = data.get("mcp", {})
    if not isinstance(tables, dict):
        raise InputError(f"{where}: [mcp] must hold [mcp.NAME] tables")
    servers = []
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise InputError(f"{where}: mcp.{name} must be a table [mcp.{name}]")
        servers.append(_build(f"[mcp.{name}] in {where}", {**table, "name": name}))
    return servers


def combine(flags: list[str], toml: list[McpServer]) -> tuple[McpServer, ...]:
    """The TOML's servers, then the flags'; a name given twice is refused."""
    servers = [*toml, *(from_flag(text) for text in flags)]
    seen: set[str] = set()
    for server in servers:
        if server.name in seen:
            raise InputError(f"--mcp: the server name {server.name!r} is given twice (flags and [mcp.NAME] "
                             "tables share one namespace)")
        seen.add(server.name)
    return tuple(servers)


def _build(where: str, raw: dict[str, Any]) -> McpServer:
    try:
        return McpServer.model_validate(raw)
    except ValidationError as exc:
        raise InputError(f"{where}: {validation_problems(exc)}") from None
