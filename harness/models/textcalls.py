"""Tool calls written as text: a reply whose content is nothing but a tool call naming an offered tool.

A server started without its tool-call parser (llama.cpp without `--jinja`, vLLM without
`--enable-auto-tool-choice --tool-call-parser NAME`) hands the model's tool call back as the reply's
text, with no `tool_calls`: the agent sees a final answer, and the run a wrong one. `text_tool_call`
tells such a reply; the meter marks its `model_call` event (the row counts them, the report warns), the
preflight warns, and an answer that is one is no answer (runner/instance.py).

What counts, the content stripped of whitespace: one or more calls, each a JSON object
`{"name": N, "arguments": {...}}` (or `parameters`, `args`, `input` for the arguments; an `id`, `type`
or `index` beside them), `{"function": {"name": N, "arguments": ...}}`, or `{"tool_calls": [calls]}`;
a JSON list of calls; several objects one after another; each optionally inside `<tool_call>...</tool_call>`
tags, a fenced code block, or after the `[TOOL_CALLS]` / `<|python_tag|>` markers some chat templates
print. Every call must name a tool the request offered: a JSON answer that names none is an answer.

Small models write such calls in forms of their own, with the server's parser on (a real Qwen2.5-Coder 0.5B
and 1.5B, issue 41): the call inside the answer tag, `<solution>{"name": ..., "arguments": ...}</solution>`,
and an empty `<tools></tools>` (the chat template's tool list, echoed) before a fenced call. The whole reply
inside one `<solution>` or `<tools>` tag is read as its content, and an empty `<tools></tools>` is no text.

Such a reply is counted and warned of, never run (a reply that is a text call is not an answer either): the
harness does not guess at calls the server did not return as calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

TEXT_TOOL_CALLS = "the server returns tool calls as text: enable its tool-call parser"
PARSERS = "(llama.cpp: --jinja; vLLM: --enable-auto-tool-choice --tool-call-parser NAME)"

_NAMES = ("name", "tool")
_ARGUMENTS = ("arguments", "parameters", "args", "input", "tool_input")
_BESIDE = ("id", "type", "index")
_FENCE = re.compile(r"^```[A-Za-z]*\s*(.*?)\s*```$", re.S)
_TAGGED = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_MARKERS = ("[TOOL_CALLS]", "<|python_tag|>")
_WRAPPED = re.compile(r"^<(solution|tools)>\s*(.*?)\s*</\1>$", re.S | re.I)
_EMPTY_TOOLS = re.compile(r"<tools>\s*</tools>", re.I)


def text_tool_call(content: str | None, offered: Collection[str]) -> str | None:
    """The name of the (first) offered tool `content` calls when it is nothing but tool calls written as
    text (the module docstring); None otherwise."""
    if not content or not offered:
        return None
    text = content.strip()
    if not text or text[0] not in "[{<`" and not text.startswith(_MARKERS):
        return None  # the common case, prose, is turned down at once
    text = _EMPTY_TOOLS.sub("", text).strip()
    while wrapped := _WRAPPED.match(text):
        text = wrapped.group(2)
    for marker in _MARKERS:
        text = text.removeprefix(marker).strip()
    if fenced := _FENCE.match(text):
        text = fenced.group(1)
    if "<tool_call>" in text:
        if _TAGGED.sub("", text).strip():
            return None  # prose beside the tagged calls
        values = [value for block in _TAGGED.findall(text) for value in _decoded(block) or [None]]
    else:
        values = _decoded(text) or []
    names = [name for value in values for name in _names(value)]
    if not names or any(name is None or name not in offered for name in names):
        return None
    return names[0]


def offered_names(tools: Any) -> list[str]:
    """The names of a request's tools: OpenAI `tools` entries, AutoGen tools or their schemas."""
    names = []
    for tool in tools or ():
        if isinstance(tool, dict):
            tool = tool.get("function", tool)
            name = tool.get("name") if isinstance(tool, dict) else None
        else:
            name = getattr(tool, "name", None)
        if isinstance(name, str):
            names.append(name)
    return names


def _decoded(text: str) -> list[Any] | None:
    """The JSON values `text` holds one after another (whitespace between), or None if it holds anything else."""
    decoder, values, at = json.JSONDecoder(), [], 0
    text = text.strip()
    while at < len(text):
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return None
        values.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return values


def _names(value: Any) -> list[str | None]:
    """The tools a JSON value calls, one entry per call (None: not a call); a list and `{"tool_calls": [...]}`
    hold calls (an empty one is not a call)."""
    if isinstance(value, dict) and set(value) == {"tool_calls"}:
        value = value["tool_calls"]
    if isinstance(value, list):
        return [name for item in value for name in _names(item)] or [None]
    return [_called(value)]


def _called(call: Any) -> str | None:
    """The tool a call object names, or None when it is not (only) a call."""
    if not isinstance(call, dict):
        return None
    if isinstance(call.get("function"), dict) and set(call) <= {"function", *_BESIDE}:
        return _called(call["function"])
    if not set(call) <= {*_NAMES, *_ARGUMENTS, *_BESIDE}:
        return None
    named = [call[key] for key in _NAMES if key in call]
    if len(named) != 1 or not isinstance(named[0], str):
        return None
    if any(key in call and not isinstance(call[key], dict | str) for key in _ARGUMENTS):
        return None
    return named[0]
