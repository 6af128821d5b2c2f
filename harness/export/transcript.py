"""A trace's conversation as chat messages, the one reading of a trace every export shares.

`messages(events)` walks a trace (dicts as in the trace file, harness/traces) in order:
* ``system_prompt`` -> a ``system`` message; ``task`` and ``user_reply`` -> ``user`` messages;
* ``model_call`` -> an ``assistant`` message (its reply text); the ``tool_call`` events after it
  become that message's ``tool_calls`` (``id``, ``function``, ``arguments``), because the trace's
  tool_call events carry the call ids the model call's summary does not;
* ``tool_result`` -> a ``tool`` message (``tool_call_id``, ``function``, ``error`` when is_error);
* ``message`` -> nothing when it repeats the last assistant message's text (the agent framework
  reports the reply the model call already holds), else an assistant message (``user`` when its
  source is "user"), its ``source`` kept (a team's agents).
Every other event (env actions, limits, verdicts, divergences) is not part of the conversation.
The system prompts come first (the trace writes the task before them). A message is a plain
dict: role, content (a string), and the keys above where they apply.

`as_text(messages, limit)` is the same conversation as plain text, at most `limit` characters
(each message cut at a tenth of it, the middle of the whole left out past the limit, and said).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

Message = dict[str, Any]


def messages(events: Iterable[Mapping[str, Any]]) -> list[Message]:
    """The trace's conversation (the module docstring)."""
    out: list[Message] = []
    assistant: Message | None = None  # the message the next tool_call events belong to
    for event in events:
        kind = event.get("type")
        if kind == "system_prompt":
            out.append({"role": "system", "content": str(event.get("content") or "")})
        elif kind in ("task", "user_reply"):
            out.append({"role": "user", "content": str(event.get("task" if kind == "task" else "content") or "")})
        elif kind == "model_call":
            assistant = {"role": "assistant", "content": str(event.get("content") or ""), "tool_calls": []}
            out.append(assistant)
            continue
        elif kind == "tool_call":
            if assistant is None:
                assistant = {"role": "assistant", "content": "", "tool_calls": []}
                out.append(assistant)
            arguments = event.get("arguments")
            assistant["tool_calls"].append({"id": str(event.get("call_id") or f"call_{len(out)}"),
                                            "function": str(event.get("name") or ""),
                                            "arguments": arguments if isinstance(arguments, dict) else {}})
            continue
        elif kind == "tool_result":
            tool: Message = {"role": "tool", "content": str(event.get("content") or ""),
                             "tool_call_id": str(event.get("call_id") or ""), "function": str(event.get("name") or "")}
            if event.get("is_error"):
                tool["error"] = tool["content"]
            out.append(tool)
        elif kind == "message":
            content, source = str(event.get("content") or ""), str(event.get("source") or "")
            last = next((m for m in reversed(out) if m["role"] == "assistant"), None)
            if last is not None and last["content"].strip() == content.strip():
                continue
            out.append({"role": "user" if source == "user" else "assistant", "content": content, "source": source})
        else:
            continue
        assistant = None
    return [m for m in out if m["role"] == "system"] + [m for m in out if m["role"] != "system"]


def _line(message: Message, cut: int) -> str:
    role = message.get("source") or message["role"]
    if message["role"] == "tool":
        role = f"tool {message.get('function', '')}" + (" (error)" if "error" in message else "")
    text = message["content"]
    calls = [f"{c['function']}({json.dumps(c['arguments'], ensure_ascii=False)})"
             for c in message.get("tool_calls") or []]
    if calls:
        text = (text + "\n" if text else "") + "calls " + "; ".join(calls)
    if len(text) > cut:
        text = text[:cut] + f" [... {len(text) - cut} characters left out]"
    return f"[{role}] {text}"


def as_text(conversation: list[Message], limit: int) -> str:
    """The conversation as text of at most about `limit` characters (the module docstring)."""
    text = "\n".join(_line(m, max(200, limit // 10)) for m in conversation)
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n[... {len(text) - 2 * half} characters of the trace left out ...]\n" + text[-half:]
