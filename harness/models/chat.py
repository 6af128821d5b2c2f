"""A framework-free chat model: messages and tool schemas in, one reply out.

For runners that use no agent framework (harness/agents/plain/). `OpenAIChat` speaks to
any OpenAI-compatible `base_url` with the official client (and to Azure and Gemini: the
section's provider, models/providers.py); `AnthropicChat` to the Messages API
(models/anthropic_messages.py); `ReplayChat` plays this
instance's recorded turns (models/replay.py). Both call through the instance's Meter, so a
failed call, a call past its deadline or a reply that is not a chat completion (not JSON,
no choices) is a ModelError, never the agent's; an OpenAI-compatible model's calls hold one
of the run's slots for it (`max_connections`, models/slots.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from harness.errors import ModelError
from harness.models.cache import CachedCall
from harness.models.config import ModelSection
from harness.models.http import too_large
from harness.models.meter import Meter
from harness.models.providers import openai_client
from harness.models.replay import needs_image
from harness.models.textcalls import offered_names
from harness.text import scrub
from harness.usage import counts

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam


@dataclass
class Reply:
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {id, name, arguments (dict)}
    usage: dict[str, int] = field(default_factory=dict)
    # why the reply ended, in OpenAI's words ("stop", "tool_calls", "length": cut at the token cap); None: unsaid
    finish_reason: str | None = None

    @staticmethod
    def of_turn(turn: dict) -> Reply:
        """The reply a turn in replay form gives (a replayed or a --cache turn), its calls given fresh ids."""
        usage = {"prompt_tokens": 0, "completion_tokens": 0, **turn.get("usage", {})}
        calls = [{"id": f"call_{uuid.uuid4().hex[:12]}", "name": c["name"],
                  "arguments": as_object(c.get("arguments", {}))} for c in turn.get("tool_calls") or []]
        return Reply(content=turn.get("content", "") if not calls else "", tool_calls=calls, usage=usage,
                     finish_reason=turn.get("finish_reason"))

    def turn(self) -> dict:
        """The replay form of this reply (with its finish_reason when the provider said one)."""
        said = {} if self.finish_reason is None else {"finish_reason": self.finish_reason}
        if self.tool_calls:
            calls = [{"name": c["name"], "arguments": c["arguments"]} for c in self.tool_calls]
            return {"tool_calls": calls, "usage": self.usage, **said}
        return {"content": self.content, "usage": self.usage, **said}


class ChatModel:
    def __init__(self, section: ModelSection, meter: Meter):
        self.section, self.meter = section, meter
        self.slots = section.slots()  # the run's cap on this model's calls in flight (None: replay, no cap)

    async def complete(self, messages: list[dict], tools: list[dict], hold: bool = True) -> Reply:
        """One reply; of its tool calls, those that run (Meter.cap_tool_calls: the rest are traced as dropped);
        `hold`: the simulated clocks stand still meanwhile (Meter.call)."""
        reply = await self.meter.call(self.section.name, lambda: _scrubbed(self._complete(messages, tools)), Reply.turn,
                                      [_plain(m) for m in messages], slots=self.slots,
                                      retries=self.section.max_retries, cached=self._cached(messages, tools),
                                      offered=offered_names(tools), hold=hold)
        reply.tool_calls = self.meter.cap_tool_calls(self.section.name, reply.tool_calls)
        return reply

    def _cached(self, messages: list[dict], tools: list[dict]) -> CachedCall[Reply] | None:
        """This request's --cache entry (models/cache.py); None without a cache, and for a replay model."""
        cache = self.meter.cache
        if cache is None or self.section.kind == "replay":
            return None
        return CachedCall(cache, cache.key(self.section, messages, tools, {}), Reply.of_turn)

    async def _complete(self, messages: list[dict], tools: list[dict]) -> Reply:
        raise NotImplementedError

    async def close(self) -> None:
        pass


class OpenAIChat(ChatModel):
    def __init__(self, section: ModelSection, meter: Meter):
        super().__init__(section, meter)
        import openai

        self._openai = openai  # a section's timeout is already capped for the instance (runner/agent_process/child.py)
        self._client = openai_client(section, asynchronous=True, paced=True)

    async def _complete(self, messages: list[dict], tools: list[dict]) -> Reply:
        kwargs: dict[str, Any] = {}
        if tools:
            kwargs["tools"] = tools
        if self.section.temperature is not None:
            kwargs["temperature"] = self.section.temperature
        if self.section.max_tokens is not None:
            kwargs["max_tokens"] = self.section.max_tokens
        if self.section.seed is not None:
            kwargs["seed"] = self.section.seed
        try:
            # the runner's messages are in the chat format (role, content, tool_calls, tool_call_id)
            chat_messages = cast("list[ChatCompletionMessageParam]", messages)
            answer = await self._client.chat.completions.create(model=self.section.model, messages=chat_messages,
                                                                **kwargs)
        except self._openai.OpenAIError as exc:
            raise ModelError(f"model {self.section.name}: {too_large(exc) or f'{type(exc).__name__}: {exc}'}") from exc
        if not isinstance(answer, self._openai.types.chat.ChatCompletion):  # the SDK returns a non-JSON reply's text
            raise ModelError(f"model {self.section.name}: the reply is not a chat completion: {str(answer)[:300]!r}")
        if not answer.choices or answer.choices[0].message is None:
            raise ModelError(f"model {self.section.name}: the reply has no choices")
        message = answer.choices[0].message
        calls = []
        for call in message.tool_calls or []:
            if not isinstance(call, self._openai.types.chat.ChatCompletionMessageFunctionToolCall):
                raise ModelError(f"model {self.section.name}: the reply has a {call.type!r} tool call; "
                                 "only function tools are offered")
            try:
                arguments = json.loads(call.function.arguments or "{}")
            except json.JSONDecodeError:
                arguments = {"_raw": call.function.arguments}
            calls.append({"id": call.id, "name": call.function.name, "arguments": as_object(arguments)})
        return Reply(content=message.content or "", tool_calls=calls, usage=counts(answer.usage),
                     finish_reason=answer.choices[0].finish_reason)

    async def close(self) -> None:
        await self._client.close()


class ReplayChat(ChatModel):
    def __init__(self, section: ModelSection, meter: Meter, turns: list[dict]):
        super().__init__(section, meter)
        self._turns = list(turns)

    async def _complete(self, messages: list[dict], tools: list[dict]) -> Reply:
        if not self._turns:
            raise ModelError(f"replay model {self.section.name}: no recorded turns left for this instance")
        turn = self._turns.pop(0)
        if turn.get("needs_image") and not any(part.get("type") == "image_url" for m in messages
                                               if isinstance(m.get("content"), list) for part in m["content"]):
            raise ModelError(needs_image(self.meter.calls + 1))
        return Reply.of_turn(turn)


async def _scrubbed(pending: Awaitable[Reply]) -> Reply:
    """The reply with each lone surrogate of its text and tool calls made U+FFFD (harness/text.py): data
    the row, the trace and the sandbox can hold (a model may send any code point JSON can spell)."""
    reply = await pending
    return Reply(content=scrub(reply.content), tool_calls=scrub(reply.tool_calls), usage=reply.usage,
                 finish_reason=reply.finish_reason)


def as_object(arguments: Any) -> dict:
    """Tool-call arguments as a JSON object: valid JSON that is not one (a list, a number) is kept
    under "_value", for the trace and the model's error message; the runner refuses it."""
    return arguments if isinstance(arguments, dict) else {"_value": arguments}


def _plain(message: dict) -> dict:
    """An OpenAI-style request message as a trace entry: role, content, and the tool call id of a result.
    A content of parts is traced as its text parts, each image part as `[image]` (never its bytes)."""
    entry = {"role": message.get("role", ""), "content": _part_text(message.get("content"))}
    if message.get("tool_call_id"):
        entry["call_id"] = message["tool_call_id"]
    return entry


def _part_text(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    return "\n".join(str(part.get("text", "")) if part.get("type") == "text" else "[image]"
                     for part in content if isinstance(part, dict))
