"""The environments' tools (harness/environments/tools.py) as AutoGen tools: a FunctionTool of each
tool function, a `SchemaFunctionTool` of each tool that brings its own JSON schema (an MCP server's);
`offered_by` reads back the tools an agent or team holds, as its model client sends them."""

from __future__ import annotations

from typing import Any

from autogen_core import CancellationToken
from autogen_core.tools import BaseTool, FunctionTool, ToolSchema
from pydantic import BaseModel

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments import tools as env_tools
from harness.traces import ToolsOffered


class SchemaFunctionTool(BaseTool[BaseModel, Any]):
    """A SchemaTool for AutoGen: the model is sent the tool's own schema; a call's arguments are checked
    against it (env_tools.arguments_model, as the plain runner checks them) and passed on as given."""

    def __init__(self, tool: env_tools.SchemaTool):
        super().__init__(env_tools.arguments_model(tool), str, tool.__name__, env_tools.description(tool))
        self._tool = tool

    @property
    def schema(self) -> ToolSchema:
        return ToolSchema(name=self.name, description=self.description,
                          parameters=self._tool.parameters,  # type: ignore[typeddict-item]  # JSON schema as sent
                          strict=False)

    async def run(self, args: BaseModel, cancellation_token: CancellationToken) -> str:
        return await self._tool(**args.model_dump())


def autogen_tool(fn: env_tools.Tool) -> BaseTool:
    """One environment tool as AutoGen's."""
    if isinstance(fn, env_tools.SchemaTool):
        return SchemaFunctionTool(fn)
    return FunctionTool(fn, description=env_tools.description(fn))


def sandbox_tools(envs: Environments, instance: Instance | None = None) -> list[BaseTool]:
    return [autogen_tool(f) for f in env_tools.sandbox_tools(envs, instance)]


def web_tools(envs: Environments) -> list[BaseTool]:
    return [autogen_tool(f) for f in env_tools.web_tools(envs)]


def definition(tool: BaseTool | ToolSchema) -> dict[str, Any]:
    """A tool as AutoGen's OpenAI client sends it: {type: function, function: {name, description, parameters,
    strict}}."""
    found: ToolSchema = tool.schema if isinstance(tool, BaseTool) else tool
    return {"type": "function", "function": {"name": found["name"], "description": found.get("description", ""),
                                             "parameters": found.get("parameters", {}),
                                             "strict": found.get("strict", False)}}


def offered_by(agent: Any) -> ToolsOffered:
    """The tools an agent, or each member of a team, holds (best effort: AutoGen keeps them private; a
    MultimodalWebSurfer's are its `default_tools`), each name once, which member holds which, and a team's
    members."""
    team = getattr(agent, "_participants", None)
    members = team or [agent]
    tools: dict[str, dict[str, Any]] = {}
    held: dict[str, list[str]] = {}
    for member in members:
        own = getattr(member, "_tools", None) or getattr(member, "default_tools", None) or []
        for found in map(definition, own):
            tools.setdefault(found["function"]["name"], found)
            held.setdefault(getattr(member, "name", "agent"), []).append(found["function"]["name"])
    return ToolsOffered(tools=list(tools.values()), agents=held if len(members) > 1 else None,
                        members=[getattr(m, "name", "agent") for m in team] if team else None)
