"""A plain prompt -> text completion function from a model section (used by the LLM judge)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.errors import InputError, ModelError
from harness.models.config import ModelSection
from harness.models.http import sync_client, too_large

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam


def completer(section: ModelSection) -> Callable[[str], str]:
    if section.kind != "openai":
        raise InputError(f"judge model {section.name}: must be an OpenAI-compatible section, not {section.kind}")
    import openai

    client = openai.OpenAI(api_key=section.api_key(), base_url=section.base_url,
                           max_retries=section.max_retries, timeout=section.timeout, http_client=sync_client())

    def complete(prompt: str) -> str:
        kwargs: dict[str, Any] = {"temperature": section.temperature} if section.temperature is not None else {}
        messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": prompt}]
        try:
            reply = client.chat.completions.create(model=section.model, messages=messages, **kwargs)
        except openai.OpenAIError as exc:
            raise ModelError(f"judge model {section.name}: {too_large(exc) or exc}") from exc
        return reply.choices[0].message.content or ""

    return complete
