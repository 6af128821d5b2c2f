"""The MCP servers' tools (`SERVER__TOOL`, the servers' own schemas): the run's, and an instance's own
(mcp_config.py `for_instance`), connected around each run of the agent's turns (harness/environments/mcp_tools.py),
so they are known only once a server runs (the dry preflight offers none). The run's preflight starts every server
of the run once and lists its tools (environments/mcp_preflight.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.families.images import Images
from harness.environments.family import Needs, RunSetup, Setup, Tool, ToolFamily
from harness.environments.mcp_config import for_instance

T = TypeVar("T")


class Mcp(ToolFamily[list[Tool]]):
    name, order = "mcp", 90
    needs = Needs(pip=("mcp",))  # a `command` server's stdio transport runs in the sandbox

    def check(self, run: RunSetup) -> str | None:
        """Every server started (a stdio one in one sandbox) and its tools listed, else InputError; only
        when there is an instance to run."""
        if run.instance is not None:
            from harness.environments.mcp_preflight import check_servers

            spec = run.spec.model_copy(update={"instance_id": "mcp-preflight"})
            check_servers(run.mcp, run.provider, spec, run.instance, log=run.log)
        return None

    def build(self, setup: Setup, envs: Environments) -> list[Tool]:
        return []  # filled once the servers are connected (serve)

    async def serve(self, setup: Setup, env: list[Tool], envs: Environments, work: Callable[[], Awaitable[T]]) -> T:
        servers = for_instance(setup.mcp, setup.instance)  # the run's and the instance's own
        if not servers:
            return await work()  # no server: the MCP client is never imported (each agent process paid ~2 ms)
        from harness.environments.mcp_tools import serving_mcp

        env.clear()  # served again (a multi-step task's next agent run): the servers connected afresh
        return await serving_mcp(servers, envs, work, into=env, images=envs.of(Images))

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        served = envs.of(Mcp)
        return list(served) if served is not None else []
