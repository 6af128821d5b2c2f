"""The AutoGen runner: any AgentChat agent or team behind the agent-runner contract.

The registry hands it a factory `factory(model_client, envs, instance, limits)` (sync or
async) returning an agent or team. Each turn is one `run_stream`; the agent keeps its
state between turns, so a simulated user's reply continues the same conversation.
AutoGen's messages become the harness's own trace events here, and nowhere else.

A vision model's task is a MultiModalMessage: the task's text and its image attachments
(harness/environments/images.py); the client shows the pictures tool results name
(agents/autogen/models.py, `with_pictures`).
"""

from __future__ import annotations

import inspect
import json

from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import BaseChatMessage, MultiModalMessage, ToolCallExecutionEvent, ToolCallRequestEvent

from harness.agents.autogen.models import build_client, image_parts
from harness.agents.autogen.tools import offered_by
from harness.agents.contract import AgentContext, AgentRunner
from harness.environments.families.images import Images
from harness.environments.images import task_text
from harness.errors import ErrorKind, kind_of
from harness.traces import Message, SystemPrompt, ToolCall, ToolResult, ToolsOffered


def _arguments(raw: str) -> dict:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


def _system_prompts(agent) -> list[tuple[str, str]]:
    """(agent name, system message) for an agent or each member of a team (best effort: AutoGen
    keeps these private)."""
    members = getattr(agent, "_participants", None) or [agent]
    found = []
    for member in members:
        for message in getattr(member, "_system_messages", None) or []:
            found.append((getattr(member, "name", "agent"), str(getattr(message, "content", message))))
    return found


class AutoGenRunner(AgentRunner):
    preload = ("autogen_ext.models.openai", "autogen_ext.models.replay", "autogen_agentchat.agents",
               "autogen_agentchat.teams", "harness.agents.autogen.builtin", "harness.agents.autogen.tools")

    @classmethod
    def preflight(cls, target, model, instance, limits, search=None):
        """The factory built dry, and its first call (harness/agents/autogen/check.py)."""
        from harness.agents.autogen.check import preflight

        return preflight(target, model, instance, limits, search)

    async def setup(self, ctx: AgentContext) -> None:
        self.ctx = ctx
        self.client = build_client(ctx.model, ctx.meter, ctx.replay_turns, images=ctx.envs.of(Images))
        self.asked = False  # the task (the first turn's message) carries the instance's pictures
        agent = self.target(self.client, ctx.envs, ctx.instance, ctx.limits)
        self.agent = await agent if inspect.isawaitable(agent) else agent
        for source, content in _system_prompts(self.agent):
            ctx.tracer.emit(SystemPrompt(source=source, content=content))

    def tools_offered(self) -> ToolsOffered:
        return offered_by(self.agent)

    async def turn(self, message: str) -> str:
        tracer, last_text = self.ctx.tracer, ""
        task = message if self.asked else await self._task(message)
        self.asked = True
        async for item in self.agent.run_stream(task=task):
            if isinstance(item, TaskResult):
                continue
            if isinstance(item, ToolCallRequestEvent):
                for call in item.content:
                    tracer.emit(ToolCall(source=item.source, name=call.name, arguments=_arguments(call.arguments),
                                         call_id=call.id))
            elif isinstance(item, ToolCallExecutionEvent):
                for done in item.content:
                    tracer.emit(ToolResult(name=done.name, call_id=done.call_id, content=str(done.content),
                                           is_error=bool(done.is_error)))
            elif isinstance(item, BaseChatMessage) and item.source != "user":
                last_text = item.to_text()
                tracer.emit(Message(source=item.source, content=last_text))
        return last_text

    async def _task(self, message: str) -> str | MultiModalMessage:
        """The task: a MultiModalMessage with its image attachments for a vision model."""
        images = self.ctx.envs.of(Images)
        if images is None:
            return message
        pictures, notes = await self.ctx.envs.call(images.task_pictures, self.ctx.instance.files)
        text = task_text(message, notes)
        return MultiModalMessage(content=[text, *image_parts(pictures)], source="user") if pictures else text

    async def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            try:
                await client.close()
            except Exception:  # noqa: BLE001 - closing must not cost the result
                pass

    def classify(self, exc: BaseException) -> ErrorKind:
        if type(exc).__module__.startswith("autogen_ext.models"):
            return "model"
        return kind_of(exc)
