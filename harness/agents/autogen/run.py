"""Run any AutoGen agent or team on a task, tracing every message and event."""

from __future__ import annotations

from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import BaseChatMessage, ToolCallRequestEvent

from harness.agents.base import AgentOutcome
from harness.environments.trace import Tracer


async def run_autogen(agent, task: str, tracer: Tracer) -> AgentOutcome:
    outcome = AgentOutcome()
    last_text = ""
    async for item in agent.run_stream(task=task):
        if isinstance(item, TaskResult):
            outcome.stop_reason = item.stop_reason
            continue
        outcome.messages += 1
        tracer.event({"type": "message", "message": item.dump()})
        if isinstance(item, ToolCallRequestEvent):
            outcome.tool_calls.extend(call.name for call in item.content)
        if isinstance(item, BaseChatMessage) and item.source != "user":
            last_text = item.to_text()
    outcome.final_message = last_text
    return outcome
