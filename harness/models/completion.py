"""A plain completion function from a model section, for judges: `completer` (a prompt -> text: the LLM
judge scorer) and `chat_completer` (chat messages, a system one included -> text: the judge of a benchmark
that judges in its sandbox, such as Gaia2's, asking through the host), through the section's provider
(models/providers.py): the chat API, or Anthropic's Messages API.

The text it returns is a `Completion`: a str that also carries the call's `usage` (tokens by
class, harness/usage.py, and their cost at the section's prices), so the judge's calls are metered
like the agent's (scoring/judge.py keeps it beside the verdict); a reply without usage is priced as the
agent's are (usage.py `Price.charge`: its section's price_per_call_without_usage, else UsageMissing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from harness.errors import InputError, ModelError
from harness.models.cache import ResponseCache
from harness.models.config import ModelSection
from harness.models.http import too_large
from harness.models.providers import anthropic_client, openai_client
from harness.text import scrub
from harness.usage import Price, Usage, counts

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam


class Completion(str):
    """A completion's text, with its call's usage, and the model id and system_fingerprint its reply named (what
    makes two runs' judges comparable: report/calls.py)."""

    usage: Usage
    model: str
    fingerprint: str

    def __new__(cls, text: str, usage: Usage, model: str = "", fingerprint: str = "") -> Completion:
        made = super().__new__(cls, text)
        made.usage, made.model, made.fingerprint = usage, model, fingerprint
        return made


def _completion(section: ModelSection, text: str, raw_usage: object, model: object = None,
                fingerprint: object = None) -> Completion:
    classes = counts(raw_usage)
    return Completion(scrub(text), Usage(**classes, llm_calls=1, cost=Price.of(section).charge(classes, section.name)),
                      model=str(model or ""), fingerprint=str(fingerprint or ""))


Chat = Callable[[list[dict[str, Any]]], Completion]


def completer(section: ModelSection, cache: Path | None = None) -> Callable[[str], str]:
    """The LLM judge's completion function: one prompt, as a user message (`chat_completer`)."""
    chat = chat_completer(section, cache)
    return lambda prompt: chat([{"role": "user", "content": prompt}])


def chat_completer(section: ModelSection, cache: Path | None = None) -> Chat:
    """A judge's completion of chat messages (role/content dicts); with `cache` (--cache-judge) a request
    asked before is answered from the --cache folder (models/cache.py), its usage counted as a hit at no cost."""
    complete = _completer(section)
    return complete if cache is None else _cached(complete, section, ResponseCache(cache))


def _cached(complete: Chat, section: ModelSection, cache: ResponseCache) -> Chat:
    def answer(messages: list[dict[str, Any]]) -> Completion:
        key = cache.key(section, messages, [], {"judge": True})
        kept = cache.get(key)
        if kept is not None:
            return Completion(str(kept.get("content", "")), Usage(**counts(kept.get("usage")), llm_calls=1,
                                                                     cache_hits=1))
        reply = complete(messages)
        cache.put(key, section.name, {"content": str(reply), "usage": counts(reply.usage)})
        return reply

    return answer


def _completer(section: ModelSection) -> Chat:
    if section.kind != "openai":
        raise InputError(f"judge model {section.name}: must be a model provider's section, not {section.kind}")
    if section.provider == "anthropic":
        return _messages_completer(section)
    import openai

    client = openai_client(section, asynchronous=False)

    def complete(messages: list[dict[str, Any]]) -> Completion:
        kwargs: dict[str, Any] = {"temperature": section.temperature} if section.temperature is not None else {}
        if section.seed is not None:
            kwargs["seed"] = section.seed
        sent = cast("list[ChatCompletionMessageParam]", messages)
        try:
            reply = client.chat.completions.create(model=section.model, messages=sent, **kwargs)
        except openai.OpenAIError as exc:
            raise ModelError(f"judge model {section.name}: {too_large(exc) or exc}") from exc
        return _completion(section, reply.choices[0].message.content or "", reply.usage, getattr(reply, "model", None),
                           getattr(reply, "system_fingerprint", None))

    return complete


def _messages_completer(section: ModelSection) -> Chat:
    import anthropic

    from harness.models.anthropic_messages import read_reply, request

    client = anthropic_client(section, asynchronous=False)

    def complete(messages: list[dict[str, Any]]) -> Completion:
        try:
            answer = client.messages.create(**request(section, messages, []))
        except anthropic.AnthropicError as exc:
            raise ModelError(f"judge model {section.name}: {too_large(exc) or exc}") from exc
        reply = read_reply(answer, f"judge {section.name}")
        return _completion(section, reply.content, reply.usage, getattr(answer, "model", None))

    return complete
