"""One instance's model budget and count, shared by every model client the agent uses.

Tokens are counted here, per client call, because frameworks' own message usage is
incomplete (AutoGen reports None for some agents). Every client an agent gets is
wrapped (harness/agents/*/) to make its calls through `call`, which checks the budgets
(`before_call`), traces a `model_call_started`, bounds the call by its deadline and
counts the reply (`after_call`); each reply becomes a `model_call` trace event, which
is also what `--record` turns into a replay file.

Rules for a failing model: whatever goes wrong inside the call (the client's error
after its own retries, no reply within `call_deadline`, a reply that is not a chat
completion) is a ModelError, traced as an `error` event of kind model and remembered
in `model_failure`, so a team that re-raises it under another type is still
classified as the model's failure.

One reply runs at most HARNESS_MAX_TOOL_CALLS_PER_REPLY tool calls (`max_tool_calls`), since
--max-steps counts model calls, not the calls one reply asks for: each runner hands a reply's
calls through `cap_tool_calls`, which keeps the first ones and traces a `tool_calls_dropped`
event for the rest (the model_call event keeps the whole reply, for --record).

A model with a cap on calls in flight (`max_connections`, models/slots.py) is called
holding one of its slots; the wait for it is bounded by the call's deadline (whose rest
bounds the call) but is not a model call: no `model_call_started`, not in the call's
seconds, not counted.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from harness.errors import MODEL_CLIENT_MODULES, HarnessError, LimitExceeded, ModelError
from harness.models.http import too_large
from harness.results.model import Usage
from harness.settings import settings
from harness.traces import ErrorEvent, ModelCall, ModelCallStarted, ToolCallsDropped, Tracer

if TYPE_CHECKING:
    from harness.models.slots import Slot, Slots

T = TypeVar("T")


class Meter:
    def __init__(self, *, max_tokens: int | None, max_steps: int | None, price_in: float = 0.0,
                 price_out: float = 0.0, tracer: Tracer | None = None, call_deadline: float | None = None,
                 request_timeout: float | None = None, max_tool_calls: int | None = None):
        self.max_tokens, self.max_steps = max_tokens, max_steps
        self.max_tool_calls = settings().max_tool_calls_per_reply if max_tool_calls is None else max_tool_calls
        self.price_in, self.price_out = price_in, price_out
        self.prompt_tokens = self.completion_tokens = self.calls = 0
        self.cost = 0.0
        self.tracer = tracer
        # Seconds one call may take, the client's retries included (None: the client's own limits).
        self.call_deadline, self.request_timeout = call_deadline, request_timeout
        # Set when a budget stops the agent: teams re-raise errors under other types.
        self.exceeded: str | None = None
        self.model_failure: ModelError | None = None  # the last call that failed, for the same reason

    def before_call(self) -> None:
        if self.max_steps is not None and self.calls >= self.max_steps:
            self.exceeded = "max_steps"
            raise LimitExceeded("max_steps", f"{self.calls} model calls made, limit {self.max_steps}")
        if self.max_tokens is not None and self.prompt_tokens + self.completion_tokens >= self.max_tokens:
            self.exceeded = "max_tokens"
            raise LimitExceeded("max_tokens", f"{self.prompt_tokens + self.completion_tokens} tokens used, "
                                              f"limit {self.max_tokens}")

    async def call(self, model: str, request: Callable[[], Awaitable[T]], turn: Callable[[T], dict[str, Any]],
                   messages: list[dict[str, Any]] | None = None, slots: Slots | None = None) -> T:
        """One metered call: `request()` makes it, `turn(reply)` gives the reply in replay form;
        `messages` (role/content dicts) is what it sent, traced as far as the trace lacks it;
        `slots`, the model's cap on calls in flight (models/slots.py): the call waits for one first."""
        self.before_call()
        slot, waited = await self.take_slot(model, slots)
        try:
            self.started(model)
            started = time.monotonic()
            try:
                reply = await asyncio.wait_for(request(), self.time_left(waited))
                done = turn(reply)
            except Exception as exc:  # noqa: BLE001 - classified by model_error
                mapped = self.model_error(exc, model, f"no reply within {time.monotonic() - started:.0f} s "
                                                      "(the client's timeout and retries included)")
                if mapped is exc:
                    raise
                raise mapped from exc
        finally:
            if slot is not None:
                slot.release()
        self.after_call(done, time.monotonic() - started, model, messages)
        return reply

    async def take_slot(self, model: str, slots: Slots | None) -> tuple[Slot | None, float]:
        """Wait for one of the model's slots (None: no cap), at most the call's deadline; returns the
        slot and the seconds waited. A waiting call is not a model call yet: it is neither traced as
        started nor counted. No slot within the deadline is the model's failure (its calls are slow)."""
        if slots is None:
            return None, 0.0
        begun = time.monotonic()
        try:
            slot = await slots.acquire(self.call_deadline)
        except TimeoutError:
            raise self.failed(ModelError(
                f"model {model}: no free connection within {time.monotonic() - begun:.0f} s (the call's "
                f"deadline): all {slots.count} of max_connections were in use by the run's other calls")) from None
        return slot, time.monotonic() - begun

    def time_left(self, waited: float) -> float | None:
        """Seconds of the call's deadline left after waiting `waited` for a slot."""
        return None if self.call_deadline is None else max(self.call_deadline - waited, 0.0)

    def model_error(self, exc: Exception, model: str, timed_out: str) -> Exception:
        """What a failed model call raises: a budget or another harness error as it is; anything
        else (the client's error, a reply that is not a chat completion, the deadline: `timed_out`
        says how) is a ModelError, remembered and traced."""
        if (big := too_large(exc)) is not None:  # the client wraps it in its connection error
            return self.failed(ModelError(f"model {model}: {big}"))
        if isinstance(exc, ModelError):
            return self.failed(exc)
        if isinstance(exc, HarnessError):  # LimitExceeded among them
            return exc
        if isinstance(exc, TimeoutError):
            return self.failed(ModelError(f"model {model}: {timed_out}"))
        return self.failed(ModelError(describe(model, exc)))

    def started(self, model: str) -> None:
        """Trace that a call went out (a killed agent's trace then shows what it was waiting for)."""
        if self.tracer is not None:
            self.tracer.emit(ModelCallStarted(model=model, timeout=self.request_timeout, at=time.time()))

    def failed(self, exc: ModelError) -> ModelError:
        """Remember and trace a failed call; returns it to be raised."""
        self.model_failure = exc
        if self.tracer is not None:
            self.tracer.emit(ErrorEvent(kind="model", message=str(exc), traceback=traceback.format_exc()))
        return exc

    def after_call(self, turn: dict[str, Any], seconds: float, model: str,
                   messages: list[dict[str, Any]] | None = None) -> None:
        """turn: the reply in replay form ({content} or {tool_calls}, with usage); messages: the request."""
        usage = turn.get("usage", {})
        self.calls += 1
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)
        self.cost += (usage.get("prompt_tokens", 0) * self.price_in
                      + usage.get("completion_tokens", 0) * self.price_out) / 1000
        if self.tracer is not None:
            new = [m for m in messages or [] if self.tracer.new_text(m.get("content"))]
            self.tracer.emit(ModelCall(model=model, seconds=round(seconds, 4), usage=usage,
                                       content=turn.get("content"), tool_calls=turn.get("tool_calls"),
                                       n_messages=None if messages is None else len(messages), messages=new))

    def cap_tool_calls(self, model: str, calls: list[T]) -> list[T]:
        """The calls of one reply that run: the first `max_tool_calls`; the rest dropped, and traced."""
        if len(calls) <= self.max_tool_calls:
            return calls
        if self.tracer is not None:
            self.tracer.emit(ToolCallsDropped(model=model, asked=len(calls), kept=self.max_tool_calls,
                                              dropped=len(calls) - self.max_tool_calls,
                                              limit=f"HARNESS_MAX_TOOL_CALLS_PER_REPLY={self.max_tool_calls}"))
        return calls[:self.max_tool_calls]

    def usage(self) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
                     llm_calls=self.calls, cost=self.cost)


def describe(model: str, exc: BaseException) -> str:
    """A failed call in words: the client's own error as it is, anything else as an unreadable reply."""
    what = f"{type(exc).__name__}: {exc}"
    if (type(exc).__module__ or "").startswith(MODEL_CLIENT_MODULES):
        return f"model {model}: {what}"
    return f"model {model}: the reply could not be read as a chat completion ({what})"
