"""One instance's model budget and count, shared by every model client the agent uses.

Tokens are counted here, per client call, because frameworks' own message usage is
incomplete (AutoGen reports None for some agents). Every client an agent gets is
wrapped (harness/agents/*/) to call `before_call` and `after_call`; each call becomes
a `model_call` trace event, which is also what `--record` turns into a replay file.
"""

from __future__ import annotations

from typing import Any

from harness.errors import LimitExceeded
from harness.results.model import Usage
from harness.traces import ModelCall, Tracer


class Meter:
    def __init__(self, *, max_tokens: int | None, max_steps: int | None, price_in: float = 0.0,
                 price_out: float = 0.0, tracer: Tracer | None = None):
        self.max_tokens, self.max_steps = max_tokens, max_steps
        self.price_in, self.price_out = price_in, price_out
        self.prompt_tokens = self.completion_tokens = self.calls = 0
        self.cost = 0.0
        self.tracer = tracer
        # Set when a budget stops the agent: teams re-raise errors under other types.
        self.exceeded: str | None = None

    def before_call(self) -> None:
        if self.max_steps is not None and self.calls >= self.max_steps:
            self.exceeded = "max_steps"
            raise LimitExceeded("max_steps", f"{self.calls} model calls made, limit {self.max_steps}")
        if self.max_tokens is not None and self.prompt_tokens + self.completion_tokens >= self.max_tokens:
            self.exceeded = "max_tokens"
            raise LimitExceeded("max_tokens", f"{self.prompt_tokens + self.completion_tokens} tokens used, "
                                              f"limit {self.max_tokens}")

    def after_call(self, turn: dict[str, Any], seconds: float, model: str) -> None:
        """turn: the reply in replay form ({content} or {tool_calls}, with usage)."""
        usage = turn.get("usage", {})
        self.calls += 1
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)
        self.cost += (usage.get("prompt_tokens", 0) * self.price_in
                      + usage.get("completion_tokens", 0) * self.price_out) / 1000
        if self.tracer is not None:
            self.tracer.emit(ModelCall(model=model, seconds=round(seconds, 4), usage=usage,
                                       content=turn.get("content"), tool_calls=turn.get("tool_calls")))

    def usage(self) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
                     llm_calls=self.calls, cost=self.cost)
