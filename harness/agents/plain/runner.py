"""The plain runner: a tool-calling loop over an OpenAI-compatible chat model, no framework.

It proves the agent-runner contract (a runner is setup + turn + close) and is a baseline
agent in its own right: the model sees the sandbox tools (and the browser's, when the
run has one), calls them, reads their results, and answers in text. The loop stops at
the model's first reply without tool calls; the harness's meter enforces --max-steps, and
runs at most HARNESS_MAX_TOOL_CALLS_PER_REPLY of one reply's calls (ChatModel.complete drops the
rest, traced; the conversation holds only the calls that ran).

Tool arguments are validated (and coerced, "2" -> 2) against the tool's signature, and a
tool that raises is reported to the model as an error result, as AutoGen's FunctionTool
does: a model's sloppy call costs it one tool result, not the instance. A dead sandbox
(InfraError) still stops the instance.

A vision model (harness/environments/images.py) gets the task's image attachments as `image_url`
parts of the task message, and the pictures its tool results name (view_image, screenshot) as a user
message of `image_url` parts right after those results (OpenAI tool messages take text only); the
conversation keeps the captions, and each request shows the latest MAX_SHOWN_IMAGES pictures.
"""

from __future__ import annotations

import json

from harness.agents.contract import AgentContext, AgentRunner
from harness.agents.system import system_message
from harness.environments.families.images import Images
from harness.environments.images import SHOWN_BELOW, latest, openai_parts, task_text
from harness.environments.tools import Toolbox, offered, schema
from harness.models.factory import chat_model
from harness.traces import Message, SystemPrompt, ToolCall, ToolResult, ToolsOffered

SOURCE = "plain"


class PlainRunner(AgentRunner):
    preload = ("openai",)

    @classmethod
    def preflight(cls, target, model, instance, limits, search=None):
        """The first call as setup makes it: the system message and the tools' schemas (but the MCP
        servers' tools: harness/agents/dry.py)."""
        from harness.agents.dry import dry_environments
        from harness.models.probe import chat_request

        envs = dry_environments(limits, model, search, instance)
        schemas = [schema(fn) for fn in offered(envs, instance)]
        return lambda: chat_request(model, tools=schemas, system=system_message(instance, envs.code.sandbox.workdir))

    async def setup(self, ctx: AgentContext) -> None:
        self.ctx = ctx
        self.model = chat_model(ctx.model, ctx.meter, ctx.replay_turns)
        self.toolbox = Toolbox(offered(ctx.envs, ctx.instance))
        self.schemas = [schema(fn) for fn in self.toolbox.tools.values()]
        system = system_message(ctx.instance, ctx.envs.code.sandbox.workdir)
        self.messages: list[dict] = [{"role": "system", "content": system}]
        self.asked = False  # the task (the first turn's message) carries the instance's pictures
        ctx.tracer.emit(SystemPrompt(source=SOURCE, content=system))

    def tools_offered(self) -> ToolsOffered:
        return ToolsOffered(tools=self.schemas)

    async def turn(self, message: str) -> str:
        content = message if self.asked else await self._task(message)
        self.messages.append({"role": "user", "content": content})
        self.asked = True
        while True:
            reply = await self.model.complete(self._shown(self.messages), self.schemas)
            if not reply.tool_calls:
                self.messages.append({"role": "assistant", "content": reply.content})
                self.ctx.tracer.emit(Message(source=SOURCE, content=reply.content))
                return reply.content
            self.messages.append({"role": "assistant", "content": reply.content or None, "tool_calls": [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                for c in reply.tool_calls]})
            for call in reply.tool_calls:
                self.messages.append({"role": "tool", "tool_call_id": call["id"],
                                      "content": await self._run_tool(call)})

    async def _task(self, message: str) -> str | list[dict]:
        """The task message: with image parts of its image attachments for a vision model."""
        images = self.ctx.envs.of(Images)
        if images is None:
            return message
        pictures, notes = await self.ctx.envs.call(images.task_pictures, self.ctx.instance.files)
        return openai_parts(task_text(message, notes), pictures) if pictures else task_text(message, notes)

    def _shown(self, messages: list[dict]) -> list[dict]:
        """The request: after each run of tool results that name pictures, a user message showing them."""
        images = self.ctx.envs.of(Images)
        if images is None:
            return messages
        runs: list[tuple[int, list[str]]] = []  # (index of a run's last tool message, the run's results)
        for index, message in enumerate(messages):
            if message["role"] == "tool":
                texts = runs.pop()[1] if runs and runs[-1][0] == index - 1 else []
                runs.append((index, texts + [message["content"]]))
        shown = dict(zip([end for end, _ in runs], latest([images.named(texts) for _, texts in runs]), strict=True))
        request: list[dict] = []
        for index, message in enumerate(messages):
            request.append(message)
            if shown.get(index):
                request.append({"role": "user", "content": openai_parts(SHOWN_BELOW, shown[index])})
        return request

    async def _run_tool(self, call: dict) -> str:
        tracer = self.ctx.tracer
        tracer.emit(ToolCall(source=SOURCE, name=call["name"], arguments=call["arguments"], call_id=call["id"]))
        content, is_error = await self.toolbox.run(call["name"], call["arguments"])
        tracer.emit(ToolResult(name=call["name"], call_id=call["id"], content=content, is_error=is_error))
        return content

    async def close(self) -> None:
        model = getattr(self, "model", None)
        if model is not None:
            await model.close()

