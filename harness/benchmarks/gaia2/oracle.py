"""A Gaia2 scenario's oracle actions, played through the scenario's own tools (the same ones an agent gets).

ARE's scenario JSON holds the oracle's write actions as `OracleEvent`s of a dependency graph, beside the user
and environment events (a user message, an email arriving). `plan` orders them; `play` calls each as a tool,
`{app}__{function}` with its arguments parsed as ARE parses them (`value_type`: str, int, float, bool, list,
dict; an empty value of an optional type is None), once every user or environment event it depends on has
happened in the running scenario. A `{{EVENT_ID}}` argument is that event's return value: an environment
event's (the id of the email that arrived), or the result of an oracle action played before.

`plan` and `play` are pure logic over two callables (a tool call, an event lookup), so they run wherever the
tools are; `run` is the oracle agent's step (harness/agents/oracle/runner.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from harness.agents.contract import AgentContext
from harness.errors import AgentError

REFERENCE = re.compile(r"^\{\{(.+?)\}\}$")
EVENT_WAIT_S = 120.0  # for an environment event an action depends on (they fire on the scenario's clock)


@dataclass(frozen=True)
class Action:
    event_id: str
    tool: str  # as the scenario serves it: `{app}__{function}`
    args: tuple[tuple[str, Any], ...]  # parsed, references left as `{{id}}` strings
    waits_for: tuple[str, ...]  # user and environment events that must have happened first


def parse(value: Any, kind: str | None) -> Any:
    """An argument's value as ARE's importer converts it (a reference stays a string, resolved at play)."""
    if value is None or value == "" or (value == "None" and kind and "None" in kind):
        return None
    if isinstance(value, str) and REFERENCE.match(value):
        return value
    base = re.match(r"Optional\[(\w+)\]|(\w+)", kind or "str")
    name = (base.group(1) or base.group(2)) if base else "str"
    if name in ("list", "dict"):
        return json.loads(value) if isinstance(value, str) else value
    if name == "bool":
        return str(value).lower() in ("true", "1", "t", "y", "yes")
    return {"int": int, "float": float}.get(name, str)(value)


def plan(scenario: dict) -> list[Action]:
    """The oracle's actions in an order that respects the event graph (ties kept in file order)."""
    events = scenario.get("events") or []
    by_id = {event["event_id"]: event for event in events}
    done: set[str] = set()
    ordered: list[Action] = []
    pending = list(events)
    while pending:
        ready = [event for event in pending if all(dep in done or dep not in by_id for dep in event["dependencies"])]
        if not ready:
            raise ValueError(f"the event graph has a cycle among {[e['event_id'] for e in pending]}")
        for event in ready:
            pending.remove(event)
            done.add(event["event_id"])
            if event.get("class_name") != "OracleEvent" or event.get("event_type") != "AGENT":
                continue
            action = event["action"]
            ordered.append(Action(
                event["event_id"], f"{action['app']}__{action['function']}",
                tuple((arg["name"], parse(arg.get("value"), arg.get("value_type"))) for arg in action.get("args", [])),
                tuple(dep for dep in event["dependencies"]
                      if by_id.get(dep, {}).get("class_name") != "OracleEvent")))
    return ordered


async def play(scenario: dict, call: Callable[[str, dict], Awaitable[str]],
               event: Callable[[str], Awaitable[dict | None]], *, wait: float = EVENT_WAIT_S) -> list[str]:
    """Play every oracle action; returns the tools' results in order. `call(tool, args)` calls a tool and gives
    its result's text (its first part: the action's return value, as JSON); `event(id)` gives a happened event's
    `{"return_value": ...}`, or None while it has not happened."""
    returned: dict[str, Any] = {}
    results = []
    for action in plan(scenario):
        for dep in action.waits_for:
            returned[dep] = await _happened(event, dep, wait)
        args = {name: _resolve(value, returned) for name, value in action.args}
        text = await call(action.tool, args)
        results.append(text)
        try:
            returned[action.event_id] = {"return_value": json.loads(text.split("\n[notification]")[0])}
        except ValueError:
            returned[action.event_id] = {"return_value": text}
    return results


async def _happened(event: Callable[[str], Awaitable[dict | None]], event_id: str, wait: float) -> dict:
    deadline = time.monotonic() + wait
    while (found := await event(event_id)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the scenario's event {event_id!r} did not happen within {wait:g} s")
        await asyncio.sleep(0.2)
    return found


def _resolve(value: Any, returned: dict[str, Any]) -> Any:
    if isinstance(value, str) and (match := REFERENCE.match(value)):
        if match.group(1) not in returned:
            raise ValueError(f"{value} names an event the oracle has not seen")
        return returned[match.group(1)]["return_value"]
    return value


async def run(ctx: AgentContext) -> str:
    """`--agent oracle` on a Gaia2 scenario: its oracle actions played through the scenario's tools."""
    from harness.benchmarks.gaia2.family import Gaia2

    instance = ctx.instance
    env = ctx.envs.of(Gaia2)
    if env is None:
        raise AgentError(f"the scenario {instance.instance_id} has no Gaia2 environment for its oracle to act in")
    tools = {tool.__name__: tool for tool in env.tools}

    async def call(name: str, arguments: dict) -> str:
        if name not in tools:
            raise AgentError(f"the scenario serves no tool {name!r} for its oracle action")
        result: str = await ctx.envs.guard(tools[name](**arguments))
        return result

    scenario = json.loads((instance.root / instance.metadata["scenario_file"]).read_text())
    await play(scenario, call, env.event)
    return "<solution>done</solution>"
