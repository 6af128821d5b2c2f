"""The token classes of a model call, read from any provider's usage, and what they cost.

Classes (the keys of a call's usage dict, in `model_call` trace events and replay files, and the
fields of results.model.Usage):

- `prompt_tokens`: every input token, cached ones included (OpenAI's `prompt_tokens` already holds
  them; for Anthropic, `input_tokens` + `cache_read_input_tokens` + `cache_creation_input_tokens`);
- `cached_prompt_tokens`: of those, read from the provider's prompt cache (OpenAI-style
  `prompt_tokens_details.cached_tokens`, Azure and Gemini alike; Anthropic's `cache_read_input_tokens`);
- `cache_write_tokens`: of those, written to the cache (Anthropic's `cache_creation_input_tokens`;
  OpenAI-style servers report none);
- `completion_tokens`: every output token, reasoning included (OpenAI's `completion_tokens` holds
  `completion_tokens_details.reasoning_tokens`);
- `reasoning_tokens`: of those, the model's hidden reasoning.

A detail class is kept only when the provider reports it above zero, so a recording of a server
without details reads as before. `counts` takes a usage dict or an SDK usage object of either shape.

Price (`Price.of(section)`): uncached input at `price_input_per_1k`, cached input at
`price_cached_input_per_1k`, cache writes at `price_cache_write_per_1k` (both default to the input
price), output at `price_output_per_1k`. Reasoning tokens are output tokens and are priced as
output: OpenAI and Anthropic bill them that way. A call's cost is the sum of each class at its price.

AutoGen's clients keep only prompt and completion tokens of a reply (its RequestUsage), so the
AutoGen runner's HTTP clients are `tapped`: while a metered call is open (`tap`, Meter.call), a
JSON reply's `usage` is read off the wire and the meter takes its classes from there. A streamed
reply (server-sent events) is not read: it keeps AutoGen's two classes.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

DETAILS = ("cached_prompt_tokens", "cache_write_tokens", "reasoning_tokens")
CLASSES = ("prompt_tokens", "completion_tokens", *DETAILS)


def counts(raw: Any) -> dict[str, int]:
    """A provider's usage (dict or SDK object, OpenAI or Anthropic shape) as the harness's classes."""
    usage = _plain(raw)
    if "input_tokens" in usage or "output_tokens" in usage:  # Anthropic's Messages API
        read, written = _int(usage.get("cache_read_input_tokens")), _int(usage.get("cache_creation_input_tokens"))
        out = {"prompt_tokens": _int(usage.get("input_tokens")) + read + written,
               "completion_tokens": _int(usage.get("output_tokens")),
               "cached_prompt_tokens": read, "cache_write_tokens": written}
    else:
        prompt_details = _plain(usage.get("prompt_tokens_details"))
        completion_details = _plain(usage.get("completion_tokens_details"))
        out = {"prompt_tokens": _int(usage.get("prompt_tokens")),
               "completion_tokens": _int(usage.get("completion_tokens")),
               "cached_prompt_tokens": _int(prompt_details.get("cached_tokens")),
               "reasoning_tokens": _int(completion_details.get("reasoning_tokens"))}
        for key in DETAILS:  # the harness's own form (a replay turn, a trace) reads as it is
            out[key] = out.get(key) or _int(usage.get(key))
    return {key: value for key, value in out.items() if key not in DETAILS or value > 0}


def _plain(raw: Any) -> dict:
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    dump = getattr(raw, "model_dump", None)
    return dump() if callable(dump) else dict(getattr(raw, "__dict__", {}))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(frozen=True)
class Price:
    """Dollars per 1000 tokens of each class."""

    input: float = 0.0
    output: float = 0.0
    cached_input: float | None = None  # None: the input price
    cache_write: float | None = None  # None: the input price

    @classmethod
    def of(cls, section: Any) -> Price:
        return cls(input=section.price_input_per_1k, output=section.price_output_per_1k,
                   cached_input=section.price_cached_input_per_1k, cache_write=section.price_cache_write_per_1k)

    def cost(self, usage: Mapping[str, int]) -> float:
        """Each class at its price (reasoning within completion, at the output price)."""
        cached, written = usage.get("cached_prompt_tokens", 0), usage.get("cache_write_tokens", 0)
        fresh = max(usage.get("prompt_tokens", 0) - cached - written, 0)
        cached_price = self.input if self.cached_input is None else self.cached_input
        write_price = self.input if self.cache_write is None else self.cache_write
        return (fresh * self.input + cached * cached_price + written * write_price
                + usage.get("completion_tokens", 0) * self.output) / 1000


_TAP: contextvars.ContextVar[list[dict[str, int]] | None] = contextvars.ContextVar("usage_tap", default=None)


@contextlib.contextmanager
def tap(seen: list[dict[str, int]]) -> Iterator[None]:
    """While open, replies read by a `tapped` client in this context append their classes to `seen`
    (tasks started inside inherit it: AutoGen's clients make their requests in tasks of their own)."""
    token = _TAP.set(seen)
    try:
        yield
    finally:
        _TAP.reset(token)


def overheard(usage: Any) -> None:
    """A reply's usage, for the open `tap` (a replay client's recorded turn: no wire to read it from)."""
    seen = _TAP.get()
    if seen is not None and usage:
        seen.append(counts(usage))


def tapped(client: Any) -> Any:
    """An async httpx (or httpx2) client that reports each JSON reply's usage to the open `tap`."""
    async def read_usage(response: Any) -> None:
        seen = _TAP.get()
        if seen is None or "json" not in response.headers.get("content-type", ""):
            return
        await response.aread()  # the body the client reads next anyway (through the size cap, models/http.py)
        try:
            usage = json.loads(response.content).get("usage")
        except (ValueError, AttributeError):
            return
        if isinstance(usage, dict):
            overheard(usage)

    hooks = client.event_hooks
    client.event_hooks = {**hooks, "response": [*hooks.get("response", []), read_usage]}
    return client
