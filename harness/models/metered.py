"""A model client wrapper that counts every call's tokens, enforces budgets, and records turns.

Tokens are counted here, per model client, because `models_usage` on AutoGen
messages is incomplete (None for some agents). Every client an agent gets is wrapped.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from autogen_core.models import ChatCompletionClient, CreateResult, RequestUsage

from harness.models.replay import turn_from_result


class BudgetExceeded(Exception):
    def __init__(self, limit: str, detail: str):
        super().__init__(f"{limit}: {detail}")
        self.limit = limit


class Meter:
    """Shared across all clients of one instance: one budget, one count."""

    def __init__(self, *, max_tokens: int | None, max_steps: int | None,
                 price_in: float = 0.0, price_out: float = 0.0,
                 on_call: Callable[[dict], None] | None = None):
        self.max_tokens, self.max_steps = max_tokens, max_steps
        self.price_in, self.price_out = price_in, price_out
        self.prompt_tokens = self.completion_tokens = self.calls = 0
        self.cost = 0.0
        self.turns: list[dict] = []
        self.on_call = on_call
        # Set when a budget stops the agent: teams re-raise errors under other types.
        self.exceeded: str | None = None

    def before_call(self) -> None:
        if self.max_steps is not None and self.calls >= self.max_steps:
            self.exceeded = "max_steps"
            raise BudgetExceeded("max_steps", f"{self.calls} model calls made, limit {self.max_steps}")
        if self.max_tokens is not None and self.prompt_tokens + self.completion_tokens >= self.max_tokens:
            self.exceeded = "max_tokens"
            raise BudgetExceeded("max_tokens", f"{self.prompt_tokens + self.completion_tokens} tokens used, "
                                               f"limit {self.max_tokens}")

    def after_call(self, result: CreateResult, seconds: float, model: str) -> None:
        self.calls += 1
        self.prompt_tokens += result.usage.prompt_tokens
        self.completion_tokens += result.usage.completion_tokens
        self.cost += (result.usage.prompt_tokens * self.price_in + result.usage.completion_tokens * self.price_out) / 1000
        turn = turn_from_result(result)
        self.turns.append(turn)
        if self.on_call:
            self.on_call({"type": "llm_call", "model": model, "seconds": round(seconds, 4), **turn})


class MeteredClient(ChatCompletionClient):
    def __init__(self, inner: ChatCompletionClient, meter: Meter, label: str = ""):
        self._inner, self._meter, self._label = inner, meter, label

    async def create(self, messages: Sequence[Any], **kwargs: Any) -> CreateResult:
        self._meter.before_call()
        started = time.monotonic()
        result = await self._inner.create(messages, **kwargs)
        self._meter.after_call(result, time.monotonic() - started, self._label)
        return result

    async def create_stream(self, messages: Sequence[Any], **kwargs: Any):
        self._meter.before_call()
        started = time.monotonic()
        async for item in self._inner.create_stream(messages, **kwargs):
            if isinstance(item, CreateResult):
                self._meter.after_call(item, time.monotonic() - started, self._label)
            yield item

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
    def model_info(self):  # type: ignore[override]
        return self._inner.model_info
