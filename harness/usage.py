"""The token classes of a model call, read from any provider's usage, what they cost, and their sum.

Token usage, below every stage that counts it (models, traces, agents, scoring, results).

Classes (the keys of a call's usage dict, in `model_call` trace events and replay files, and the
fields of `Usage`):

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

A reply that reports no tokens at all (a server that stopped sending `usage` after the preflight showed it)
is never $0 in silence (`Price.charge`): it costs the section's `price_per_call_without_usage` when it
declares one, else it is `UsageMissing`, an input error naming the section that stops the run (exit 2). A
section priced at 0 (a free local model) is $0 either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from harness.errors import InputError

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
    without_usage: float | None = None  # a call whose reply reports no tokens (None: UsageMissing, see `charge`)

    @classmethod
    def of(cls, section: Any) -> Price:
        return cls(input=section.price_input_per_1k, output=section.price_output_per_1k,
                   cached_input=section.price_cached_input_per_1k, cache_write=section.price_cache_write_per_1k,
                   without_usage=getattr(section, "price_per_call_without_usage", None))

    def charge(self, usage: Mapping[str, int], model: str) -> float:
        """What one call of `model` (its section's name) costs: its tokens at their prices; a reply reporting none
        (no `usage`), `without_usage`, else UsageMissing (never $0 in silence) unless the tokens cost nothing."""
        if usage.get("prompt_tokens", 0) or usage.get("completion_tokens", 0) or not (self.input or self.output):
            return self.cost(usage)
        if self.without_usage is not None:
            return self.without_usage
        raise UsageMissing(f"model {model} [llm.{model}]: a reply without token usage (the server sent `usage` at "
                           "the preflight and none now), so its cost is unknown; set price_per_call_without_usage "
                           f"in [llm.{model}] to price such calls, or use a server that reports `usage`")

    def cost(self, usage: Mapping[str, int]) -> float:
        """Each class at its price (reasoning within completion, at the output price)."""
        cached, written = usage.get("cached_prompt_tokens", 0), usage.get("cache_write_tokens", 0)
        fresh = max(usage.get("prompt_tokens", 0) - cached - written, 0)
        cached_price = self.input if self.cached_input is None else self.cached_input
        write_price = self.input if self.cache_write is None else self.cache_write
        return (fresh * self.input + cached * cached_price + written * write_price
                + usage.get("completion_tokens", 0) * self.output) / 1000


class UsageMissing(InputError):
    """A priced model's reply reported no tokens and its section declares no price for such a call (`charge`)."""

    stops_run = True


class Usage(BaseModel):
    """Tokens by class (above: cached and cache-write tokens are within prompt_tokens,
    reasoning tokens within completion_tokens; 0 where the provider reports none, and in older rows),
    calls, and their cost in dollars at the section's prices."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    llm_calls: int = 0
    cache_hits: int = 0  # of llm_calls, those --cache answered (harness/models/cache.py), at no cost
    cost: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields})

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
