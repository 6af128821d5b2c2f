"""The Anthropic Messages API for the framework-free runners: chat-format messages in, a Reply out.

The plain runner, the preflight and the LLM judge keep their conversation in the chat format
(role system/user/assistant/tool, OpenAI-style `tool_calls`); `request` maps it onto one Messages
API request, `read_reply` maps the answer back:

- the system messages become the request's separate `system` (joined by blank lines);
- an assistant message's `tool_calls` become `tool_use` blocks (its text, when there is any, a
  `text` block first); each `tool` message a `tool_result` block (its `tool_use_id` the call's id)
  in a user message, consecutive user-side messages merged into one (the API alternates roles);
- a content of parts keeps its text parts; an `image_url` part (a data URL) becomes an `image` block;
- OpenAI-format tool schemas become `{name, description, input_schema}`;
- `max_tokens` is required: the section's, else DEFAULT_MAX_TOKENS;
- the answer's `text` blocks are the reply's content, its `tool_use` blocks its tool calls (id,
  name, input); usage: harness/usage.py's classes (prompt tokens are `input_tokens` plus the cache's
  read and written input tokens, which Anthropic counts apart and which are kept as classes of their
  own; completion tokens `output_tokens`).

`AnthropicChat` is the plain runner's ChatModel over it (models/chat.py): the SDK's error after its
own retries (429 with `retry-after`, 529 overloaded, 5xx) and a reply that is not a message are
ModelErrors naming the section.
"""

from __future__ import annotations

import json
from typing import Any

from harness.errors import ModelError
from harness.models.chat import ChatModel, Reply, as_object
from harness.models.config import DEFAULT_MAX_TOKENS, ModelSection
from harness.models.http import too_large
from harness.models.meter import Meter
from harness.models.providers import anthropic_client, in_body
from harness.usage import counts


def request(section: ModelSection, messages: list[dict], tools: list[dict]) -> dict[str, Any]:
    """The keyword arguments of `messages.create` for these chat-format messages and tool schemas."""
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    kwargs: dict[str, Any] = {"model": section.model, "max_tokens": section.max_tokens or DEFAULT_MAX_TOKENS,
                              "messages": conversation([m for m in messages if m.get("role") != "system"])}
    if system:
        kwargs["system"] = system
    if tools:
        kwargs["tools"] = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
                            "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}}}
                           for t in tools]
    if section.temperature is not None:
        kwargs["temperature"] = section.temperature
    return in_body(kwargs)


def conversation(messages: list[dict]) -> list[dict]:
    """Chat-format user, assistant and tool messages as alternating Messages API messages."""
    out: list[dict] = []
    for message in messages:
        role = "assistant" if message.get("role") == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue  # an empty text: the API refuses empty content
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(message: dict) -> list[dict[str, Any]]:
    if message.get("role") == "tool":
        return [{"type": "tool_result", "tool_use_id": message.get("tool_call_id", ""),
                 "content": str(message.get("content") or "")}]
    content = message.get("content")
    blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if isinstance(content, str) and content else []
    if isinstance(content, list):  # chat-format parts: text, and images as data URLs
        blocks = [_part(part) for part in content]
    for call in message.get("tool_calls") or []:
        function = call["function"]
        arguments = function.get("arguments")
        blocks.append({"type": "tool_use", "id": call["id"], "name": function["name"],
                       "input": _input(arguments)})
    return blocks


def _part(part: dict) -> dict[str, Any]:
    """A chat-format content part as a block: an `image_url` data URL as a base64 `image`."""
    if part.get("type") != "image_url":
        return part
    head, _, data = str(part["image_url"]["url"]).partition(",")
    media = head.removeprefix("data:").removesuffix(";base64")
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def _input(arguments: Any) -> dict:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            arguments = {"_raw": arguments}
    return as_object(arguments)


def read_reply(answer: Any, name: str) -> Reply:
    """A Messages API answer as a Reply; ModelError when it is not one (no content list)."""
    import anthropic

    if not isinstance(answer, anthropic.types.Message):  # the SDK returns a non-JSON reply's text
        raise ModelError(f"model {name}: the reply is not a Messages API message: {str(answer)[:300]!r}")
    text, calls = [], []
    for block in answer.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            calls.append({"id": block.id, "name": block.name, "arguments": as_object(block.input)})
    stop: str | None = answer.stop_reason  # the Messages API's "max_tokens" is the chat API's "length"
    return Reply(content="".join(text), tool_calls=calls, usage=counts(answer.usage),
                 finish_reason=None if stop is None else _FINISH.get(stop, stop))


_FINISH = {"max_tokens": "length", "end_turn": "stop", "tool_use": "tool_calls"}


class AnthropicChat(ChatModel):
    def __init__(self, section: ModelSection, meter: Meter):
        super().__init__(section, meter)
        import anthropic

        self._anthropic = anthropic
        self._client = anthropic_client(section, asynchronous=True, paced=True)

    async def _complete(self, messages: list[dict], tools: list[dict]) -> Reply:
        try:
            answer = await self._client.messages.create(**request(self.section, messages, tools))
        except self._anthropic.AnthropicError as exc:
            raise ModelError(f"model {self.section.name}: {too_large(exc) or f'{type(exc).__name__}: {exc}'}") from exc
        return read_reply(answer, self.section.name)

    async def close(self) -> None:
        await self._client.close()
