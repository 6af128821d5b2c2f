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
The Anthropic client's own info is taken only for a name it lists exactly (it would match any
other claude-* name to claude-2.0's, without function calling).
A replay client's vision is the section's (`ModelSection.vision`).

Pictures (harness/environments/images.py): for a vision model the client is given the instance's
ImageEnv, and each request gets, right after every tool-results message whose results name
pictures (view_image, screenshot), a UserMessage of those pictures as AutoGen `Image`s (the latest
MAX_SHOWN_IMAGES of the conversation): AutoGen's tool results carry text only, so the agent's own
context keeps the captions and the pictures are put back into every request it makes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, cast

from autogen_core import FunctionCall, Image, MessageHandlerContext
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    ModelInfo,
    RequestUsage,
    UserMessage,
)
from autogen_ext.models.replay import ReplayChatCompletionClient

from harness.environments.images import SHOWN_BELOW, ImageEnv, Picture, latest
from harness.errors import ModelError
from harness.models.cache import CachedCall
from harness.models.config import DEFAULT_MAX_TOKENS, ModelSection
from harness.models.http import async_client
from harness.models.meter import Meter
from harness.models.providers import azure_deployment
from harness.models.replay import needs_image
from harness.models.slots import Slots
from harness.models.tap import overheard, tapped
from harness.models.textcalls import offered_names
from harness.text import scrub
from harness.traces import acting
from harness.usage import counts

DEFAULT_MODEL_INFO: ModelInfo = {"vision": False, "function_calling": True, "json_output": False,
                                 "family": "unknown", "structured_output": False}


def build_client(section: ModelSection, meter: Meter, replay_turns: list[dict] | None,
                 images: ImageEnv | None = None) -> MeteredClient:
    """The metered client of a section; `images`: a vision model's pictures (shown after the results naming them)."""
    return MeteredClient(inner_client(section, replay_turns, paced=True), meter, label=section.name,
                         slots=section.slots(), images=images, retries=section.max_retries, section=section)


def inner_client(section: ModelSection, replay_turns: list[dict] | None = None,
                 headers: dict[str, str] | None = None, paced: bool = False) -> ChatCompletionClient:
    """The AutoGen client of a section, unmetered (`headers`: sent with every request; `paced`: its
    429s and 503s are left to the Meter that will wrap it, models/pacing.py)."""
    if section.kind == "replay":
        info = cast(ModelInfo, {**DEFAULT_MODEL_INFO, "vision": section.vision})
        return SightedReplay(replay_turns or [], model_info=info)
    kwargs: dict = {"model": section.model, "api_key": section.api_key(),
                    "max_retries": section.max_retries, "timeout": section.timeout}
    if section.endpoint():
        kwargs["base_url"] = section.endpoint()
    if section.temperature is not None:
        kwargs["temperature"] = section.temperature
    if section.max_tokens is not None:
        kwargs["max_tokens"] = section.max_tokens
    if section.seed is not None and section.provider != "anthropic":  # the Messages API takes no seed
        kwargs["seed"] = section.seed
    if headers:
        kwargs["default_headers"] = headers
    client_class = _client_class(section, kwargs, paced)
    given = section.model_info
    if given is None and section.provider == "anthropic" and not _anthropic_knows(section.model):
        given = {}  # AutoGen matches an unknown claude-* name to claude-2.0's info: no function calling
    if given is not None:
        # ModelSection checked the section's fields: each one of ModelInfo's, of its type
        info = cast(ModelInfo, {**DEFAULT_MODEL_INFO, **given})
        return client_class(**kwargs, model_info=info)
    try:
        return client_class(**kwargs)  # a name AutoGen knows: its own model_info
    except ValueError:  # "model_info is required when model name is not recognized / a valid OpenAI model"
        return client_class(**kwargs, model_info=DEFAULT_MODEL_INFO.copy())


def _anthropic_knows(model: str) -> bool:
    """Whether AutoGen's Anthropic client has this exact model name's info."""
    from autogen_ext.models.anthropic import _model_info

    return model in _model_info._MODEL_INFO


def _client_class(section: ModelSection, kwargs: dict, paced: bool) -> Any:
    """AutoGen's client class (or factory) for the section's provider, `kwargs` completed for it;
    every one gets an HTTP client that caps a reply's size (models/http.py) and reads each reply's
    usage by class for the Meter (models/tap.py `tapped`: AutoGen's own usage keeps two classes)."""
    if section.provider == "anthropic":
        from harness.agents.autogen.anthropic_client import anthropic_chat_client

        kwargs["http_client"] = tapped(async_client("anthropic", paced=paced))
        kwargs.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        return anthropic_chat_client
    from autogen_ext.models.openai import AzureOpenAIChatCompletionClient, OpenAIChatCompletionClient

    kwargs["http_client"] = tapped(async_client(paced=paced))
    if section.provider == "azure":
        kwargs.update(azure_endpoint=section.azure_endpoint, api_version=section.api_version,
                      azure_deployment=azure_deployment(section))
        return AzureOpenAIChatCompletionClient
    return OpenAIChatCompletionClient


class SightedReplay(ReplayChatCompletionClient):
    """AutoGen's replay client; a turn recorded with `"needs_image": true` (models/replay.py) is a model
    error when the request it answers carries no image."""

    def __init__(self, turns: list[dict], **kwargs: Any):
        super().__init__(to_create_results(turns), **kwargs)
        self._needs_image = [bool(turn.get("needs_image")) for turn in turns]
        self._usages = [turn.get("usage") for turn in turns]  # by class: AutoGen's RequestUsage keeps two

    async def create(self, messages: Sequence[LLMMessage], *args: Any, **kwargs: Any) -> CreateResult:
        index = self._current_index
        if index < len(self._needs_image) and self._needs_image[index] and not any(
                isinstance(part, Image) for m in messages if isinstance(m.content, list) for part in m.content):
            raise ModelError(needs_image(index + 1))
        result = await super().create(messages, *args, **kwargs)
        overheard(self._usages[index])  # the recorded classes reach the Meter as a provider's would
        return result


def to_create_results(turns: list[dict]) -> list[CreateResult]:
    results = []
    for turn in turns:
        classes = counts(turn.get("usage"))  # RequestUsage takes these two only (the meter gets all: overheard)
        usage = RequestUsage(prompt_tokens=classes["prompt_tokens"], completion_tokens=classes["completion_tokens"])
        if turn.get("tool_calls"):
            calls = [FunctionCall(id=f"call_{uuid.uuid4().hex[:12]}", name=c["name"],
                                  arguments=json.dumps(c.get("arguments", {})))
                     for c in turn["tool_calls"]]
            results.append(CreateResult(finish_reason="function_calls", content=calls, usage=usage, cached=False))
        else:
            cut = turn.get("finish_reason") == "length"  # a recorded cut replays as one
            results.append(CreateResult(finish_reason="length" if cut else "stop", content=turn.get("content", ""),
                                        usage=usage, cached=False))
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
        return {"tool_calls": calls, "usage": usage, "finish_reason": _finish(result.finish_reason)}
    return {"content": result.content, "usage": usage, "finish_reason": _finish(result.finish_reason)}


def _finish(reason: str | None) -> str | None:
    """AutoGen's finish reason in the chat API's words (it says "function_calls" for "tool_calls")."""
    return {"function_calls": "tool_calls", "unknown": None}.get(reason or "unknown", reason)


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


def image_parts(pictures: list[Picture]) -> list[str | Image]:
    """Each picture's caption and the picture, as parts of a MultiModalMessage or UserMessage."""
    parts: list[str | Image] = []
    for picture in pictures:
        parts += [picture.caption, Image.from_base64(base64.b64encode(picture.data).decode())]
    return parts


def with_pictures(messages: Sequence[LLMMessage], images: ImageEnv | None) -> Sequence[LLMMessage]:
    """The request: after each tool-results message that names pictures, a user message showing them."""
    if images is None:
        return messages
    results = [i for i, m in enumerate(messages) if isinstance(m, FunctionExecutionResultMessage)]
    groups = [images.named(r.content for r in cast(FunctionExecutionResultMessage, messages[i]).content)
              for i in results]
    shown = dict(zip(results, latest(groups), strict=True))
    request: list[LLMMessage] = []
    for index, message in enumerate(messages):
        request.append(message)
        if shown.get(index):
            request.append(UserMessage(content=[SHOWN_BELOW, *image_parts(shown[index])], source="tools"))
    return request


def scrubbed_result(result: CreateResult) -> CreateResult:
    """The result with each lone surrogate of its text, thought and function calls made U+FFFD
    (harness/text.py): a model may send any code point JSON can spell; the row, trace and sandbox hold it."""
    content: Any = result.content
    if isinstance(content, list):
        content = [FunctionCall(id=call.id, name=scrub(call.name), arguments=_scrubbed_arguments(call.arguments))
                   for call in content]
    else:
        content = scrub(content)
    return result.model_copy(update={"content": content, "thought": scrub(result.thought)})


def _scrubbed_arguments(arguments: str) -> str:
    """Arguments (JSON text, parsed by the tool later) whose escapes spell a lone surrogate: re-written scrubbed."""
    arguments = scrub(arguments)
    if "\\ud" not in arguments:
        return arguments
    try:
        return json.dumps(scrub(json.loads(arguments)))
    except json.JSONDecodeError:
        return arguments


async def _scrubbed(pending: Awaitable[CreateResult]) -> CreateResult:
    return scrubbed_result(await pending)


def member() -> str | None:
    """The team's member (or manager) whose message handler makes the current call, by name: AgentChat registers
    each as the agent type `NAME_TEAMID` keyed by the team's id; None outside a team (a lone agent)."""
    try:
        agent_id = MessageHandlerContext.agent_id()
    except RuntimeError:
        return None
    return agent_id.type.removesuffix(f"_{agent_id.key}")


class MeteredClient(ChatCompletionClient):
    """Counts every call on the instance's Meter (budgets included) before handing it on; with
    `slots` (the run's cap on the model's calls in flight) each call holds one of them. A reply's
    function calls beyond the meter's per-reply cap are cut from the CreateResult the agent gets
    (Meter.cap_tool_calls traces them), so AutoGen's agents never run them. With `images` (a vision
    model's) every request shows the pictures its tool results name (with_pictures)."""

    def __init__(self, inner: ChatCompletionClient, meter: Meter, label: str = "", slots: Slots | None = None,
                 images: ImageEnv | None = None, retries: int = 0, section: ModelSection | None = None):
        self._inner, self._meter, self._label, self._slots = inner, meter, label, slots
        self._images, self._retries, self._section = images, retries, section

    async def create(self, messages: Sequence[Any], **kwargs: Any) -> CreateResult:
        messages = with_pictures(messages, self._images)
        reply = lambda: _scrubbed(self._inner.create(messages, **kwargs))  # noqa: E731
        with acting(member()):
            return self._capped(await self._meter.call(self._label, reply, turn_from_result, trace_messages(messages),
                                                       slots=self._slots, retries=self._retries,
                                                       cached=self._cached(messages, kwargs),
                                                       offered=offered_names(kwargs.get("tools"))))

    def _cached(self, messages: Sequence[Any], kwargs: dict[str, Any]) -> CachedCall[CreateResult] | None:
        """This request's --cache entry (models/cache.py): its messages, tool schemas and the create
        call's other arguments; None without a cache, and for a replay model."""
        cache, section = self._meter.cache, self._section
        if cache is None or section is None or section.kind == "replay":
            return None
        tools = [getattr(tool, "schema", tool) for tool in kwargs.get("tools") or []]
        rest = {key: value for key, value in kwargs.items() if key not in ("tools", "cancellation_token")}
        key = cache.key(section, [m.model_dump(mode="json") for m in messages], tools, rest)
        return CachedCall(cache, key, lambda turn: to_create_results([turn])[0].model_copy(update={"cached": True}))

    def _capped(self, result: CreateResult) -> CreateResult:
        if not isinstance(result.content, list):
            return result
        kept = self._meter.cap_tool_calls(self._label, result.content)
        return result if kept is result.content else result.model_copy(update={"content": kept})

    async def create_stream(self, messages: Sequence[Any], **kwargs: Any):
        """Streamed: the deadline bounds the whole stream (the wait for a slot included); a failure
        mid-stream is the model's too. The slot is held until the stream ends or is dropped. A 429/503
        before the stream's first item is waited out as in Meter.call, and the stream started again."""
        meter, messages = self._meter, with_pictures(messages, self._images)
        who = member()  # its events' `agent` (set around each, not across this generator's yields)
        meter.before_call()
        admission = await meter.admit()
        slot, waited = await meter.take_slot(self._label, self._slots, admission)
        meter.in_flight += 1  # a step already (Meter.call)
        try:
            with acting(who):
                meter.started(self._label)
            started = time.monotonic()
            deadline = meter.time_left(waited)
            ends = None if deadline is None else started + deadline
            stream = self._inner.create_stream(messages, **kwargs).__aiter__()
            attempt, sent, tried, streaming = 0, time.time(), time.monotonic(), False
            async with meter.generating() as took:  # a simulated clock stands still while it streams
                while True:
                    left = None if ends is None else ends - time.monotonic()
                    try:
                        item = await asyncio.wait_for(stream.__anext__(), left)
                    except StopAsyncIteration:
                        return
                    except Exception as exc:  # noqa: BLE001 - the same rule as Meter.call
                        with acting(who):
                            paced = not streaming and await meter.pace(self._label, exc, attempt, self._retries,
                                                                       ends, self._slots, sent)
                        if paced:
                            attempt, sent, tried = attempt + 1, time.time(), time.monotonic()
                            stream = self._inner.create_stream(messages, **kwargs).__aiter__()
                            continue
                        within = f"{meter.call_deadline or 0:.0f} s{meter.whence()}"
                        mapped = meter.model_error(exc, self._label, f"the stream did not end within {within}")
                        if mapped is exc:
                            raise
                        raise mapped from exc
                    streaming = True
                    item = scrubbed_result(item) if isinstance(item, CreateResult) else scrub(item)
                    if isinstance(item, CreateResult):
                        if self._slots is not None:
                            self._slots.succeeded()
                        took.append(time.monotonic() - tried)
                        done = turn_from_result(item)
                        with acting(who):
                            meter.after_call(done, time.monotonic() - started, self._label,
                                             trace_messages(messages), offered=offered_names(kwargs.get("tools")))
                        if admission is not None:
                            admission.close(meter.charge(counts(done["usage"]), self._label))
                        item = self._capped(item)
                    yield item
        finally:
            meter.in_flight -= 1
            if slot is not None:
                slot.release()
            if admission is not None:
                admission.close()

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
