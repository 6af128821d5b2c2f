"""The environments' tools (harness/environments/tools.py) as AutoGen FunctionTools."""

from __future__ import annotations

from autogen_core.tools import FunctionTool

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments import tools as env_tools


def sandbox_tools(envs: Environments, instance: Instance | None = None) -> list[FunctionTool]:
    return [FunctionTool(f, description=env_tools.description(f)) for f in env_tools.sandbox_tools(envs, instance)]


def web_tools(envs: Environments) -> list[FunctionTool]:
    return [FunctionTool(f, description=env_tools.description(f)) for f in env_tools.web_tools(envs)]
