"""The AutoGen runner's checks before any container (`AgentRunner.preflight`).

The factory is called once in the harness's process, as an agent process will call it, with the
AutoGen client the run will use (the real OpenAI-compatible one, carrying the preflight header;
for replay models the replay client) over dry environments (harness/agents/dry.py). What fails
there fails for every instance: it raises, and the preflight says so before any sandbox starts
(e.g. a model_info without function calling for an agent with tools). It must return an AgentChat
agent or team (something with `run_stream`). A factory that touches the sandbox while building
(e.g. `websurfer`, which connects to the sandbox's browser) is not checked this way.

The first call is then made through that client the way the agent makes its calls: the first
member with tools gives its tools and system message (an agent built from no member with tools
sends none); an agent that could not be built dry is taken to send the harness's own tools.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
from collections.abc import Callable
from typing import Any

from harness.agents.contract import Limits
from harness.agents.dry import SandboxNeeded, dry_environments
from harness.datasets.model import Instance
from harness.environments.websearch.settings import SearchSettings
from harness.models.config import ModelSection
from harness.models.probe import PROBE_HEADER, PROBE_PROMPT, Answered, NotACompletion
from harness.models.textcalls import offered_names, text_tool_call


def preflight(factory: Callable, section: ModelSection, instance: Instance, limits: Limits,
              search: SearchSettings | None = None) -> Callable[[], Answered]:
    from harness.agents.autogen.models import inner_client

    client = inner_client(section, [], headers={PROBE_HEADER: "1"})
    envs = dry_environments(limits, section, search, instance)
    agent = _dry_build(factory, client, envs, instance, limits)
    if agent is NEEDS_SANDBOX:
        from harness.agents.autogen.tools import sandbox_tools, web_tools

        tools, system = sandbox_tools(envs, instance) + web_tools(envs), None
    else:
        if not callable(getattr(agent, "run_stream", None)):
            raise TypeError(f"the factory returned {type(agent).__name__}, not an AutoGen agent or team "
                            "(nothing with run_stream)")
        tools, system = asyncio.run(_first_member_with_tools(agent))
    return lambda: asyncio.run(_first_call(client, tools, system))


NEEDS_SANDBOX = object()  # what _dry_build returns for a factory that used the sandbox while building


def _dry_build(factory: Callable, client, envs, instance: Instance, limits: Limits) -> Any:
    """The factory's agent or team, built without a sandbox; NEEDS_SANDBOX if building it needed one."""
    def build() -> Any:
        envs.publish()  # in a copied context: the harness's own context variables stay unset
        made = factory(client, envs, instance, limits)
        return asyncio.run(_awaited(made)) if inspect.isawaitable(made) else made

    try:
        return contextvars.copy_context().run(build)
    except SandboxNeeded:
        return NEEDS_SANDBOX


async def _awaited(awaitable):
    return await awaitable


async def _first_member_with_tools(agent) -> tuple[list, str | None]:
    """(tool schemas, system message) of the first member (or the agent itself) that has tools."""
    for member in getattr(agent, "_participants", None) or [agent]:
        tools = [tool for bench in getattr(member, "_workbench", None) or [] for tool in await bench.list_tools()]
        if tools:
            messages = getattr(member, "_system_messages", None) or []
            return tools, (str(messages[0].content) if messages else None)
    return [], None


async def _first_call(client, tools: list, system: str | None) -> Answered:
    import openai
    from autogen_core.models import SystemMessage, UserMessage
    from pydantic import ValidationError

    messages = ([SystemMessage(content=system)] if system else []) + [UserMessage(content=PROBE_PROMPT, source="user")]
    try:
        result = await client.create(messages, tools=tools)
    except openai.OpenAIError:
        raise
    except (AttributeError, TypeError, KeyError, IndexError, ValidationError, json.JSONDecodeError) as exc:
        raise NotACompletion(f"{type(exc).__name__}: {exc}") from None  # e.g. a text/html page parsed as a reply
    finally:
        await client.close()
    text = result.content if isinstance(result.content, str) else None
    return Answered(text_tool_call=text_tool_call(text, offered_names(tools)))
