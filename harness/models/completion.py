"""A plain prompt -> text completion function from a model section (used by the LLM judge),
through the section's provider (models/providers.py): the chat API, or Anthropic's Messages API.

The text it returns is a `Completion`: a str that also carries the call's `usage` (tokens by
class, harness/usage.py, and their cost at the section's prices), so the judge's calls are metered
like the agent's (scoring/judge.py keeps it beside the verdict)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    """A completion's text, with its call's usage."""

    usage: Usage

    def __new__(cls, text: str, usage: Usage) -> Completion:
        made = super().__new__(cls, text)
        made.usage = usage
        return made


def _completion(section: ModelSection, text: str, raw_usage: object) -> Completion:
    classes = counts(raw_usage)
    return Completion(scrub(text), Usage(**classes, llm_calls=1, cost=Price.of(section).cost(classes)))


def completer(section: ModelSection, cache: Path | None = None) -> Callable[[str], str]:
    """The judge's completion function; with `cache` (--cache-judge) a prompt asked before is answered
    from the --cache folder (models/cache.py), its usage counted as a hit at no cost."""
    complete = _completer(section)
    return complete if cache is None else _cached(complete, section, ResponseCache(cache))


def _cached(complete: Callable[[str], str], section: ModelSection, cache: ResponseCache) -> Callable[[str], str]:
    def answer(prompt: str) -> str:
        key = cache.key(section, [{"role": "user", "content": prompt}], [], {"judge": True})
        kept = cache.get(key)
        if kept is not None:
            return Completion(str(kept.get("content", "")), Usage(**counts(kept.get("usage")), llm_calls=1,
                                                                     cache_hits=1))
        reply = complete(prompt)
        usage = getattr(reply, "usage", None)
        cache.put(key, section.name, {"content": str(reply), "usage": {} if usage is None else counts(usage)})
        return reply

    return answer


def _completer(section: ModelSection) -> Callable[[str], str]:
    if section.kind != "openai":
        raise InputError(f"judge model {section.name}: must be a model provider's section, not {section.kind}")
    if section.provider == "anthropic":
        return _messages_completer(section)
    import openai

    client = openai_client(section, asynchronous=False)

    def complete(prompt: str) -> str:
        kwargs: dict[str, Any] = {"temperature": section.temperature} if section.temperature is not None else {}
        messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": prompt}]
        try:
            reply = client.chat.completions.create(model=section.model, messages=messages, **kwargs)
        except openai.OpenAIError as exc:
            raise ModelError(f"judge model {section.name}: {too_large(exc) or exc}") from exc
        return _completion(section, reply.choices[0].message.content or "", reply.usage)

    return complete


def _messages_completer(section: ModelSection) -> Callable[[str], str]:
    import anthropic

    from harness.models.anthropic_messages import read_reply, request

    client = anthropic_client(section, asynchronous=False)

    def complete(prompt: str) -> str:
        try:
            answer = client.messages.create(**request(section, [{"role": "user", "content": prompt}], []))
        except anthropic.AnthropicError as exc:
            raise ModelError(f"judge model {section.name}: {too_large(exc) or exc}") from exc
        reply = read_reply(answer, f"judge {section.name}")
        return _completion(section, reply.content, reply.usage)

    return complete
