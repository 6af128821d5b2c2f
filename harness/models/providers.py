"""The provider SDK clients of a model section: the one place that builds them.

`[llm.NAME] provider` picks the API (models/config.py):

- openai (default): `openai.OpenAI` / `AsyncOpenAI` at `base_url`: any OpenAI-compatible server;
- gemini: the same client at Google's OpenAI-compatible endpoint (`ModelSection.endpoint`);
- azure: `openai.AzureOpenAI` / `AsyncAzureOpenAI` at `azure_endpoint`, `api_version`, the
  deployment's URL (`deployment`, default the model), the key sent as Azure's `api-key` header;
- anthropic: `anthropic.Anthropic` / `AsyncAnthropic` at `base_url` (default the SDK's): the
  Messages API (models/anthropic.py maps the chat format onto it).

Every client gets the section's key, timeout and retries (the SDK's own: 408/409/429/5xx and
dropped connections; a metered call's client, `paced`, leaves 429 and 503 to the Meter, which waits
as the provider asks within the call's deadline: models/pacing.py) and an HTTP client with the
reply size limit (models/http.py). `headers` go with every request (the preflight's header).

The anthropic SDK installed (2.x) takes no sampling parameters in `messages.create` (no
`temperature`, `top_p`, `top_k`), while the API still does: `in_body` moves those it lacks into
`extra_body`, for the plain runner's calls and AutoGen's alike.
"""

from __future__ import annotations

from typing import Any

from harness.models.config import ModelSection
from harness.models.http import async_client, sync_client
from harness.models.tap import tapped


def openai_client(section: ModelSection, *, asynchronous: bool, headers: dict[str, str] | None = None,
                  paced: bool = False) -> Any:
    """The openai SDK's client for an openai, gemini or azure section (`paced`: a metered call's,
    models/pacing.py)."""
    import openai

    common: dict[str, Any] = {"api_key": section.api_key(), "max_retries": section.max_retries,
                              "timeout": section.timeout, "default_headers": headers,
                              "http_client": tapped(async_client(paced=paced), usage=False) if asynchronous
                              else sync_client()}
    if section.provider == "azure":
        azure: Any = openai.AsyncAzureOpenAI if asynchronous else openai.AzureOpenAI
        return azure(azure_endpoint=section.azure_endpoint, api_version=section.api_version,
                     azure_deployment=azure_deployment(section), **common)
    plain: Any = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return plain(base_url=section.endpoint(), **common)


def anthropic_client(section: ModelSection, *, asynchronous: bool, headers: dict[str, str] | None = None,
                     paced: bool = False) -> Any:
    """The anthropic SDK's client for an anthropic section (`paced`: a metered call's, models/pacing.py)."""
    import anthropic

    cls = anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic
    http = tapped(async_client("anthropic", paced=paced), usage=False) if asynchronous else sync_client("anthropic")
    return cls(api_key=section.api_key(), base_url=section.endpoint(), max_retries=section.max_retries,
               timeout=section.timeout, default_headers=headers, http_client=http)


SAMPLING = ("temperature", "top_p", "top_k")


def in_body(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`messages.create` keyword arguments with the sampling parameters the SDK does not take sent in the body."""
    import inspect

    import anthropic

    taken = inspect.signature(anthropic.resources.messages.AsyncMessages.create).parameters
    moved = {key: kwargs[key] for key in SAMPLING if key in kwargs and key not in taken}
    if not moved:
        return kwargs
    rest = {key: value for key, value in kwargs.items() if key not in moved}
    return {**rest, "extra_body": {**(kwargs.get("extra_body") or {}), **moved}}


def azure_deployment(section: ModelSection) -> str:
    return section.deployment or section.model
