"""The agent's tools over the instance's environments, as plain async functions.

Each tool family declares its own (harness/environments/family.py, families/); `sandbox_tools` and
`web_tools` give them kit by kit, in the families' order. Every runner offers these same functions:
AutoGen wraps them as FunctionTools, the plain runner sends `schema(fn)` to the model; a `SchemaTool`
(an MCP server's tool) carries its own JSON schema instead of a signature. Their docstrings are what
the model reads. All go through `Environments.call/guard`, so a dead sandbox stops the instance.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model, model_validator

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.families import tools as family_tools
from harness.environments.family import SchemaTool, Tool
from harness.errors import InfraError, LimitExceeded


class _SchemaArguments(BaseModel):
    """Arguments checked against a SchemaTool's JSON schema (`validator`), passed on as given."""

    model_config = ConfigDict(extra="allow")
    validator: ClassVar[Any]

    @model_validator(mode="before")
    @classmethod
    def _against_schema(cls, data: Any) -> Any:
        problems = [f"{'.'.join(map(str, e.absolute_path)) or 'arguments'}: {e.message}"
                    for e in cls.validator.iter_errors(data)]
        if problems:
            raise ValueError("; ".join(problems))
        return data


def sandbox_tools(envs: Environments, instance: Instance | None = None) -> list[Tool]:
    """The tools every agent with tools gets, family by family (harness/environments/family.py): the code
    and file tools, then those offered to this instance (`view_image` for a vision model, `web_search` when
    the run has a search provider, `search_corpus` when the instance names a corpus, the MCP servers'...)."""
    return family_tools(envs, instance, kit="sandbox")


def web_tools(envs: Environments) -> list[Tool]:
    """The browser's tools (none without a browser); the browser runs inside the sandbox and starts on first use."""
    return family_tools(envs, kit="browser")


def offered(envs: Environments, instance: Instance | None = None) -> list[Tool]:
    """Every tool an agent without a framework gets for this instance: the sandbox tools, then the browser's
    (the plain runner's; an in-sandbox agent's over MCP)."""
    return sandbox_tools(envs, instance) + web_tools(envs)


class Toolbox:
    """Tools by name, called as a model calls them (the plain runner; the in-sandbox agent's MCP server)."""

    def __init__(self, tools: list[Tool]):
        self.tools = {fn.__name__: fn for fn in tools}
        self.arguments = {name: arguments_model(fn) for name, fn in self.tools.items()}

    async def run(self, name: str, arguments: Any) -> tuple[str, bool]:
        """One call: its result and whether it is an error. Arguments are validated (and coerced, "2" -> 2)
        against the tool's; a wrong call or a tool that raises is an error result for the caller to read
        (as AutoGen's FunctionTool does), but a dead sandbox (InfraError) stops the instance, and so does a
        paid tool's call past a budget (LimitExceeded, models/meter.py `paying`): raised."""
        fn = self.tools.get(name)
        if fn is None:
            return f"Error: no tool named {name!r}; the tools are {', '.join(self.tools)}", True
        try:
            checked = self.arguments[name].model_validate(arguments).model_dump()
        except ValidationError as exc:  # wrong, missing or mistyped arguments: the caller's mistake, told to it
            return f"Error: bad arguments for {name}: {exc}", True
        try:
            return await fn(**checked), False
        except (InfraError, LimitExceeded):
            raise  # the sandbox is gone (Environments.on_fatal has recorded it), or a budget: the instance stops
        except Exception as exc:  # noqa: BLE001 - the tool failed on this call: the caller is told
            return f"Error: {name} failed: {type(exc).__name__}: {exc}", True


def description(fn: Tool) -> str:
    return " ".join((fn.__doc__ or fn.__name__).split())


def arguments_model(fn: Tool) -> type[BaseModel]:
    """A pydantic model of a tool's parameters (lax: "2" becomes 2; unknown arguments are refused)."""
    if isinstance(fn, SchemaTool):
        import jsonschema

        validator = jsonschema.validators.validator_for(fn.parameters)(fn.parameters)
        return type(f"{fn.__name__}_arguments", (_SchemaArguments,), {"validator": validator})
    hints = typing.get_type_hints(fn)
    # (type, default) per parameter; Any: create_model takes the definitions as keyword arguments
    fields: dict[str, typing.Any] = {
        name: (hints.get(name, typing.Any), ... if p.default is inspect.Parameter.empty else p.default)
        for name, p in inspect.signature(fn).parameters.items()}
    return create_model(f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


def schema(fn: Tool) -> dict:
    """The OpenAI `tools` entry for a tool function (parameters from its signature, or its own: SchemaTool)."""
    if isinstance(fn, SchemaTool):
        return {"type": "function", "function": {"name": fn.__name__, "description": description(fn),
                                                 "parameters": fn.parameters}}
    parameters = arguments_model(fn).model_json_schema()
    parameters.pop("title", None)
    for prop in parameters.get("properties", {}).values():
        prop.pop("title", None)
    return {"type": "function", "function": {"name": fn.__name__, "description": description(fn),
                                             "parameters": parameters}}
