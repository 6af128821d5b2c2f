"""AutoGen model clients from a model section, metered (the only place AutoGen meets providers).

Every call goes through the instance's Meter (models/meter.py): budgets, the per-call
deadline, and one rule for failures: anything the inner client raises (the provider's
error, a reply that is not a chat completion, no choices) is a ModelError. An OpenAI
client's calls each hold one of the run's slots for the model (`max_connections`,
models/slots.py); replayed ones do not.

model_info: AutoGen's own for a model name it knows, unless the section gives one; for any
other name (a local or vLLM server's), DEFAULT_MODEL_INFO: function calling assumed (the agents
call tools; the preflight's real request with the tools tells a server that refuses them), vision,
JSON output and structured output off, family "unknown". Fields in the section override these.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from autogen_core import FunctionCall
from autogen_core.models import ChatCompletionClient, CreateResult, ModelInfo, RequestUsage

from harness.models.config import ModelSection
from harness.models.http import async_client
from harness.models.meter import Meter
from harness.models.slots import Slots

DEFAULT_MODEL_INFO: ModelInfo = {"vision": False, "function_calling": True, "json_output": False,
                                 "family": "unknown", "structured_output": False}


def build_client(section: ModelSection, meter: Meter, replay_turns: list[dict] | None) -> MeteredClient:
    return MeteredClient(inner_client(section, replay_turns), meter, label=section.name, slots=section.slots())


def inner_client(section: ModelSection, replay_turns: list[dict] | None = None,
                 headers: dict[str, str] | None = None) -> ChatCompletionClient:
    """The AutoGen client of a section, unmetered (`headers`: sent with every request)."""
    if section.kind == "replay":
        from autogen_ext.models.replay import ReplayChatCompletionClient

        return ReplayChatCompletionClient(to_create_results(replay_turns or []), model_info=DEFAULT_MODEL_INFO)
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    kwargs: dict = {"model": section.model, "api_key": section.api_key(),
                    "max_retries": section.max_retries, "timeout": section.timeout}
    if section.base_url:
        kwargs["base_url"] = section.base_url
    if section.temperature is not None:
        kwargs["temperature"] = section.temperature
    if section.max_tokens is not None:
        kwargs["max_tokens"] = section.max_tokens
    if headers:
        kwargs["default_headers"] = headers
    kwargs["http_client"] = async_client()  # a reply's size is capped (models/http.py)
    if section.model_info is not None:
        # ModelSection checked the section's fields: each one of ModelInfo's, of its type
        info = cast(ModelInfo, {**DEFAULT_MODEL_INFO, **section.model_info})
        return OpenAIChatCompletionClient(**kwargs, model_info=info)
    try:
        return OpenAIChatCompletionClient(**kwargs)  # a name AutoGen knows: its own model_info
    except ValueError:  # "model_info is required when model name is not a valid OpenAI model"
        return OpenAIChatCompletionClient(**kwargs, model_info=DEFAULT_MODEL_INFO.copy())


def to_create_results(turns: list[dict]) -> list[CreateResult]:
    results = []
    for turn in turns:
        usage = RequestUsage(**{"prompt_tokens": 0, "completion_tokens": 0, **turn.get("usage", {})})
        if turn.get("tool_calls"):
            calls = [FunctionCall(id=f"call_{uuid.uuid4().hex[:12]}", name=c["name"],
                                  arguments=json.dumps(c.get("arguments", {})))
                     for c in turn["tool_calls"]]
            results.append(CreateResult(finish_reason="function_calls", content=calls, usage=usage, cached=False))
        else:
            results.append(CreateResult(finish_reason="stop", content=turn.get("content", ""), usage=usage,
                                        cached=False))
    return results


def turn_from_result(result: CreateResult) -> dict:
    """The replay TURN for one CreateResult (what the meter traces and --record keeps)."""
    usage = {"prompt_tokens": result.usage.prompt_tokens, "completion_tokens": result.usage.completion_tokens}
    if isinstance(result.content, list):
        calls = []
        for call in result.content:
            try:
                arguments = json.loads(call.arguments)
            except (json.JSONDecodeError, TypeError):
                arguments = {"_raw": call.arguments}
            calls.append({"name": call.name, "arguments": arguments})
        return {"tool_calls": calls, "usage": usage}
    return {"content": result.content, "usage": usage}


_ROLES = {"SystemMessage": "system", "UserMessage": "user", "AssistantMessage": "assistant",
          "FunctionExecutionResultMessage": "tool"}


def _text(content: Any) -> str | None:
    """A message's content as text: strings kept, images as [image], function calls left out (the
    previous model_call holds them)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else "[image]" for p in content if not isinstance(p, FunctionCall)]
        return "\n".join(parts) or None
    return None if content is None else str(content)


def trace_messages(messages: Sequence[Any]) -> list[dict]:
    """AutoGen LLMMessages as role/content dicts (a tool-results message gives one entry per result)."""
    out: list[dict] = []
    for message in messages:
        role = _ROLES.get(type(message).__name__, type(message).__name__)
        if role == "tool":
            for result in getattr(message, "content", None) or []:
                out.append({"role": "tool", "content": str(getattr(result, "content", "")),
                            "call_id": getattr(result, "call_id", "")})
            continue
        entry = {"role": role, "content": _text(getattr(message, "content", None))}
        if getattr(message, "source", None):
            entry["source"] = message.source
        out.append(entry)
    return out


class MeteredClient(ChatCompletionClient):
    """Counts every call on the instance's Meter (budgets included) before handing it on; with
    `slots` (the run's cap on the model's calls in flight) each call holds one of them. A reply's
    function calls beyond the meter's per-reply cap are cut from the CreateResult the agent gets
    (Meter.cap_tool_calls traces them), so AutoGen's agents never run them."""

    def __init__(self, inner: ChatCompletionClient, meter: Meter, label: str = "", slots: Slots | None = None):
        self._inner, self._meter, self._label, self._slots = inner, meter, label, slots

    async def create(self, messages: Sequence[Any], **kwargs: Any) -> CreateResult:
        return self._capped(await self._meter.call(self._label, lambda: self._inner.create(messages, **kwargs),
                                                   turn_from_result, trace_messages(messages), slots=self._slots))

    def _capped(self, result: CreateResult) -> CreateResult:
        if not isinstance(result.content, list):
            return result
        kept = self._meter.cap_tool_calls(self._label, result.content)
        return result if kept is result.content else result.model_copy(update={"content": kept})

    async def create_stream(self, messages: Sequence[Any], **kwargs: Any):
        """Streamed: the deadline bounds the whole stream (the wait for a slot included); a failure
        mid-stream is the model's too. The slot is held until the stream ends or is dropped."""
        meter = self._meter
        meter.before_call()
        slot, waited = await meter.take_slot(self._label, self._slots)
        try:
            meter.started(self._label)
            started = time.monotonic()
            deadline = meter.time_left(waited)
            stream = self._inner.create_stream(messages, **kwargs).__aiter__()
            while True:
                left = None if deadline is None else deadline - (time.monotonic() - started)
                try:
                    item = await asyncio.wait_for(stream.__anext__(), left)
                except StopAsyncIteration:
                    return
                except Exception as exc:  # noqa: BLE001 - the same rule as Meter.call
                    mapped = meter.model_error(exc, self._label, f"the stream did not end within "
                                                                 f"{meter.call_deadline or 0:.0f} s")
                    if mapped is exc:
                        raise
                    raise mapped from exc
                if isinstance(item, CreateResult):
                    meter.after_call(turn_from_result(item), time.monotonic() - started, self._label,
                                     trace_messages(messages))
                    item = self._capped(item)
                yield item
        finally:
            if slot is not None:
                slot.release()

    async def close(self) -> None:
        await self._inner.close()

    def actual_usage(self) -> RequestUsage:
        return self._inner.actual_usage()

    def total_usage(self) -> RequestUsage:
        return self._inner.total_usage()

    def count_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
        return self._inner.count_tokens(messages, **kwargs)

    def remaining_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
        return self._inner.remaining_tokens(messages, **kwargs)

    @property
    def capabilities(self) -> Mapping[str, Any]:  # type: ignore[override]
        return self._inner.capabilities

    @property
    def model_info(self) -> ModelInfo:
        return self._inner.model_info
