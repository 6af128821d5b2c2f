"""The wire formats the proxy speaks, mapped onto the harness's chat model (models/chat.py).

Requests come in as OpenAI chat completions (`messages`, `tools`) or as Anthropic Messages (`system`,
content blocks, `tools` with `input_schema`), either with `stream` (answered as that format's
server-sent events holding the whole reply, once the model has given it); both become the chat
format `ChatModel.complete` takes, and its `Reply` goes back in the format asked. The configured
model's own settings (model id, temperature, max_tokens) are the ones used: what the agent asks for
is not forwarded. A request that is not of its format raises BadRequest (answered 400, told to the
agent).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from harness.models.chat import Reply


def _finish(reply: Reply) -> str:
    """Why the reply ended, in OpenAI's words: the provider's own "length" (cut at its token cap) or
    "content_filter" passed on, so the program sees a cut reply as cut; else by what the reply holds."""
    if reply.finish_reason in ("length", "content_filter"):
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


# The same, in Anthropic's words (a filtered reply has no stop reason of its own there: it ends its turn).
_STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use", "stop": "end_turn", "content_filter": "end_turn"}


class BadRequest(ValueError):
    """The agent's request is not one of its format (the agent's mistake, answered 400)."""


def chat_request(body: Any) -> tuple[list[dict], list[dict]]:
    """(messages, tools) of an OpenAI chat completion request."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        raise BadRequest("the request must be a JSON object with a non-empty 'messages' list")
    if not all(isinstance(m, dict) and "role" in m for m in body["messages"]):
        raise BadRequest("every message must be an object with a 'role'")
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"]
    return body["messages"], tools


def chat_completion(reply: Reply, model: str) -> dict[str, Any]:
    """An OpenAI chat completion holding `reply`."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = _openai_calls(reply)
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                         "finish_reason": _finish(reply)}],
            "usage": _openai_usage(reply)}


def chat_stream(reply: Reply, model: str) -> bytes:
    """The same reply as a chat completion stream: one delta, the finish, the usage, [DONE]."""
    head = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    delta: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
    if reply.tool_calls:
        delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(_openai_calls(reply))]
    finish = _finish(reply)
    chunks = [dict(head, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
              dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]),
              dict(head, choices=[], usage=_openai_usage(reply))]
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"


def _openai_calls(reply: Reply) -> list[dict[str, Any]]:
    return [{"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}} for c in reply.tool_calls]


def _openai_usage(reply: Reply) -> dict[str, int]:
    prompt, completion = reply.usage.get("prompt_tokens", 0), reply.usage.get("completion_tokens", 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def messages_request(body: Any) -> tuple[list[dict], list[dict]]:
    """(messages, tools) in the chat format of an Anthropic Messages request."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        raise BadRequest("the request must be a JSON object with a non-empty 'messages' list")
    messages: list[dict] = [{"role": "system", "content": _text(body["system"])}] if body.get("system") else []
    for message in body["messages"]:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise BadRequest("every message must be an object with role 'user' or 'assistant'")
        messages.extend(_chat_messages(message["role"], message.get("content", "")))
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t.get("input_schema") or {"type": "object"}}}
             for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t]
    return messages, tools


def _chat_messages(role: str, content: Any) -> list[dict]:
    """One Messages-API message as chat messages: tool results become `tool` messages."""
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise BadRequest(f"a {role} message's content must be a string or a list of blocks")
    blocks = [b for b in content if isinstance(b, dict)]
    text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    if role == "assistant":
        calls = [{"id": b.get("id", ""), "type": "function",
                  "function": {"name": b.get("name", ""), "arguments": json.dumps(b.get("input") or {})}}
                 for b in blocks if b.get("type") == "tool_use"]
        return [{"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})}]
    results = [{"role": "tool", "tool_call_id": b.get("tool_use_id", ""), "content": _text(b.get("content", ""))}
               for b in blocks if b.get("type") == "tool_result"]
    return results + ([{"role": "user", "content": text}] if text or not results else [])


def _text(content: Any) -> str:
    """A string, or the text of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    raise BadRequest(f"expected a string or a list of content blocks, not {type(content).__name__}")


def message_reply(reply: Reply, model: str) -> dict[str, Any]:
    """An Anthropic Messages response holding `reply`."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.content}] if reply.content else []
    content += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]}
                for c in reply.tool_calls]
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": _STOP_REASONS[_finish(reply)],
            "stop_sequence": None, "usage": {"input_tokens": reply.usage.get("prompt_tokens", 0),
                                             "output_tokens": reply.usage.get("completion_tokens", 0)}}


def message_stream(reply: Reply, model: str) -> bytes:
    """The same reply as a Messages stream (server-sent events): message_start; per content block a
    content_block_start, one delta (text_delta, or the tool's input whole as one input_json_delta) and
    content_block_stop; message_delta with the stop reason and usage; message_stop."""
    message = message_reply(reply, model)
    start: dict[str, Any]
    events: list[dict[str, Any]] = [{"type": "message_start", "message": dict(
        message, content=[], stop_reason=None, usage=dict(message["usage"], output_tokens=0))}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            start = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [{"type": "content_block_start", "index": index, "content_block": start},
                   {"type": "content_block_delta", "index": index, "delta": delta},
                   {"type": "content_block_stop", "index": index}]
    events += [{"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": message["usage"]},
               {"type": "message_stop"}]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
