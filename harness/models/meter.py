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

With `--cache DIR` (models/cache.py) a call whose request was asked before is answered from the
cache before anything else (no slot, no admission, no cost), its `model_call` event marked cached.

A 429 or 503 is waited out here as the provider asks, when the wait fits in the call's deadline,
else the call fails at once saying what was asked (models/pacing.py); each wait is a `model_wait`
trace event, inside the call (after its `model_call_started`, in its seconds).

A model with a cap on calls in flight (`max_connections`, models/slots.py) is called
holding one of its slots; the wait for it is bounded by the call's deadline (whose rest
bounds the call) but is not a model call: no `model_call_started`, not in the call's
seconds, not counted.

A simulated clock that must stand still while the model generates (Gaia2's, as ARE's own agents pause it) is a
`Clock` in `clocks` (set by the agent's process from its instance's benchmark: `Benchmark.metered`): each call
pauses it as its request goes out and resumes it, on every way out, moved on by the seconds its reply took to
generate (ARE's "measured" mode: the successful request's, not the waits for a 429 or the failed tries before it; a
call that failed, by all of it).

Cost: each reply's token classes (harness/usage.py: prompt, cached prompt, cache writes,
completion, reasoning; from the client's reply, or off the wire for AutoGen's clients, which
keep only two) at the section's `Price`. `--max-instance-cost` (`max_cost`) stops the agent at
its next call once the instance's cost reaches it, as --max-tokens does; `--max-cost` (`budget`,
models/budget.py) admits each call against the run's spend across all agent processes, before
its slot (`admit`); the call's cost is added to the run's spend as its reply is read (`listened`).
A reply that reports no tokens costs the section's `price_per_call_without_usage`, else it stops the run
(`UsageMissing`, an input error naming the section, kept in `refused`): never $0 in silence (usage.py).

Every other paid call the instance makes, whoever asks for it (a Gaia2 judge's call asked through the bridge,
a transcription, a paid search; from a built-in runner or a program in the sandbox through the MCP relay), is
made inside `paying`: the same checks before it (--max-instance-cost against the instance's spend, the
agent's and its judge's; the run's --max-cost admitted as a model call is; --max-steps for a step) and its
cost counted as it ends (`pay`), in the agent's totals or, for a judge, in `judged`. A tool call that no model
reply asked for (a sandbox program's own, over MCP) is a step of its own (`tool_step`): --max-steps counts
steps, the model calls and those, as the plain runner's tool calls are bounded by its model calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from harness.errors import MODEL_CLIENT_MODULES, HarnessError, LimitExceeded, ModelError
from harness.models.budget import Admission, RunBudget
from harness.models.config import MODEL_SHARE
from harness.models.http import on_send, too_large
from harness.models.pacing import asked, not_waited, retries_spent
from harness.models.tap import tap
from harness.models.textcalls import text_tool_call
from harness.settings import settings
from harness.traces import (
    ErrorEvent,
    ModelAttempt,
    ModelCall,
    ModelCallStarted,
    ModelWait,
    ToolCallsDropped,
    Tracer,
    actor,
)
from harness.usage import Price, Usage, UsageMissing, counts

if TYPE_CHECKING:
    from harness.models.cache import CachedCall, ResponseCache
    from harness.models.slots import Slot, Slots

T = TypeVar("T")


class Clock(Protocol):
    """A simulated clock held still during each model call, then moved on by the call's seconds."""

    async def pause(self) -> None: ...

    async def resume(self, seconds: float) -> None: ...


class Meter:
    def __init__(self, *, max_tokens: int | None, max_steps: int | None, price: Price | None = None,
                 tracer: Tracer | None = None, call_deadline: float | None = None,
                 request_timeout: float | None = None, max_tool_calls: int | None = None,
                 max_cost: float | None = None, budget: RunBudget | None = None,
                 cache: ResponseCache | None = None):
        self.cache = cache  # --cache (models/cache.py): the runners' calls look their requests up in it
        self.max_tokens, self.max_steps, self.max_cost, self.budget = max_tokens, max_steps, max_cost, budget
        self.max_tool_calls = settings().max_tool_calls_per_reply if max_tool_calls is None else max_tool_calls
        self.price = price or Price()
        self.totals = Usage()  # every call so far: tokens by class, calls, cost
        self.tracer = tracer
        # Seconds one call may take, the client's retries included (None: the client's own limits).
        self.call_deadline, self.request_timeout = call_deadline, request_timeout
        # Set when a budget stops the agent: teams re-raise errors under other types.
        self.exceeded: str | None = None
        self.model_failure: ModelError | None = None  # the last call that failed, for the same reason
        self.refused: UsageMissing | None = None  # a reply that could not be priced: the run stops (exit 2)
        self.clocks: list[Clock] = []  # simulated clocks paused while the model generates
        self.judged = Usage()  # the calls of a judge asked from the instance (Gaia2's, through the bridge)
        self.tool_steps = 0  # tool calls no model reply asked for (a sandbox program's own): steps too
        self.in_flight = 0  # model calls begun and not ended: steps too, so that calls made at once stop at the limit
        self._lock = threading.Lock()  # the totals, added to from the event loop and from tools' threads
        self._one_paid = threading.Lock()  # held by each paid call under --max-instance-cost (`paying`)

    def before_call(self) -> None:
        self._check_steps()
        if self.max_tokens is not None and self.totals.total_tokens >= self.max_tokens:
            self.exceeded = "max_tokens"
            raise LimitExceeded("max_tokens", f"{self.totals.total_tokens} tokens used, limit {self.max_tokens}")
        self._check_cost()

    def _check_steps(self) -> None:
        if self.max_steps is not None and self.steps >= self.max_steps:
            self.exceeded = "max_steps"
            own = f" and {self.tool_steps} tool calls no model call asked for" if self.tool_steps else ""
            raise LimitExceeded("max_steps", f"{self.calls} model calls{own} made, limit {self.max_steps}")

    def _check_cost(self) -> None:
        if self.max_cost is not None and self.spent >= self.max_cost:
            self.exceeded = "max_instance_cost"
            raise LimitExceeded("max_instance_cost", f"${self.spent:.4f} spent, limit --max-instance-cost "
                                                     f"${self.max_cost:g}")

    @property
    def calls(self) -> int:
        return self.totals.llm_calls

    @property
    def steps(self) -> int:
        """What --max-steps counts: the model calls (those in flight too), and the tool calls no model reply asked
        for."""
        return self.totals.llm_calls + self.in_flight + self.tool_steps

    @property
    def spent(self) -> float:
        """The instance's spend so far, what --max-instance-cost counts: the agent's calls and its judge's."""
        return self.totals.cost + self.judged.cost

    def tool_step(self) -> None:
        """A tool call no model reply asked for (a sandbox program's own, over MCP): one step, refused
        (LimitExceeded) once --max-steps are taken, as a model call would be."""
        with self._lock:
            self._check_steps()
            self.tool_steps += 1

    def charge(self, usage: dict[str, int], model: str) -> float:
        """One reply's cost (Price.charge); a reply without usage that cannot be priced is kept in `refused`."""
        try:
            return self.price.charge(usage, model)
        except UsageMissing as exc:
            self.refused = exc
            raise

    @contextlib.contextmanager
    def paying(self, judge: bool = False, step: bool = False) -> Iterator[Callable[[Usage], None]]:
        """Around one paid call that is not the agent's model call, in a thread of its own (it may wait for the
        run's budget): checked before it as a model call is (--max-instance-cost, --max-steps when `step`,
        --max-cost's admission: LimitExceeded), then `pay(usage)` counts what it cost, in `judged` for a
        `judge`'s call, else in the agent's totals; the run's spend gets it as the block ends. Under
        --max-instance-cost such calls go one at a time (ARE's judge asks several at once), so each is checked
        against the spend of those before it."""
        with self._one_paid if self.max_cost is not None else contextlib.nullcontext():
            with self._paying(judge, step) as pay:
                yield pay

    @contextlib.contextmanager
    def _paying(self, judge: bool, step: bool) -> Iterator[Callable[[Usage], None]]:
        if step:
            self.tool_step()
        self._check_cost()
        admission = None
        if self.budget is not None:
            try:
                admission = self.budget.admit_waiting()
            except LimitExceeded:
                self.exceeded = "max_cost"
                raise
        paid = [0.0]

        def pay(usage: Usage) -> None:
            with self._lock:
                if judge:
                    self.judged += usage
                else:
                    self.totals += usage
            paid[0] += usage.cost

        try:
            yield pay
        except UsageMissing as exc:  # a judge's reply that could not be priced: the run stops, whoever caught it
            self.refused = exc
            raise
        finally:
            if admission is not None:
                admission.close(paid[0])

    async def admit(self) -> Admission | None:
        """The run's admission of the next call (models/budget.py: it may wait), None without --max-cost;
        LimitExceeded("max_cost") once the run's spend reached the budget."""
        if self.budget is None:
            return None
        try:
            return await self.budget.admit()
        except LimitExceeded:
            self.exceeded = "max_cost"
            raise

    def _sending(self, model: str) -> Callable[[], None]:
        """Called as each request of one call is sent: every one after the first (the client's own
        retries) is traced as a `model_attempt`, live (a killed process's trace keeps it)."""
        sent = [0]

        def send() -> None:
            sent[0] += 1
            if sent[0] > 1 and self.tracer is not None:
                self.tracer.emit(ModelAttempt(model=model, attempt=sent[0], at=time.time(), **actor()))

        return send

    def listened(self, model: str, request: Callable[[], Awaitable[T]], turn: Callable[[T], dict[str, Any]],
                 admission: Admission | None) -> tuple[Callable[[], Awaitable[T]], Callable[[T], dict[str, Any]]]:
        """`request` and `turn` of one call as the meter makes them: the request with the usage tap open
        (harness/usage.py), the turn with the usage the provider sent, its cost added to the run's spend."""
        wire: list[dict[str, int]] = []
        said: dict[str, Any] = {}  # the request's sampling, the reply's model id and fingerprint (models/tap.py)

        async def heard() -> T:
            with tap(wire, said), on_send(self._sending(model)):
                return await request()

        def read(reply: T) -> dict[str, Any]:
            done = {**turn(reply), **said}
            if wire:
                done = {**done, "usage": wire[-1]}
            if admission is not None:
                admission.close(self.charge(counts(done.get("usage")), model))
            return done

        return heard, read

    async def call(self, model: str, request: Callable[[], Awaitable[T]], turn: Callable[[T], dict[str, Any]],
                   messages: list[dict[str, Any]] | None = None, slots: Slots | None = None,
                   retries: int = 0, cached: CachedCall[T] | None = None,
                   offered: Collection[str] = (), hold: bool = True) -> T:
        """One metered call: `request()` makes it, `turn(reply)` gives the reply in replay form;
        `messages` (role/content dicts) is what it sent, traced as far as the trace lacks it;
        `slots`, the model's cap on calls in flight (models/slots.py): the call waits for one first;
        `retries`: how many 429/503 answers it waits out (models/pacing.py), within its deadline;
        `cached`: its entry in the --cache (models/cache.py): a hit answers it, a miss keeps its reply;
        `offered`: the names of the tools the request offered (a reply calling one in its text is marked);
        `hold`: the simulated clocks stand still meanwhile (False: a call made while a tool runs, as Gaia2's app
        agents' are, which ARE's clock does not wait for)."""
        self.before_call()
        self.in_flight += 1  # a step already: calls made at once (ARE's app agents') cannot all pass --max-steps
        try:
            return await self._call(model, request, turn, messages, slots, retries, cached, offered, hold)
        finally:
            self.in_flight -= 1

    async def _call(self, model: str, request: Callable[[], Awaitable[T]], turn: Callable[[T], dict[str, Any]],
                    messages: list[dict[str, Any]] | None, slots: Slots | None, retries: int,
                    cached: CachedCall[T] | None, offered: Collection[str], hold: bool) -> T:
        if cached is not None and (kept := cached.hit()) is not None:
            self.after_call(kept, 0.0, model, messages, cached=True, offered=offered)
            return cached.rebuild(kept)
        admission = await self.admit()
        request, turn = self.listened(model, request, turn, admission)
        slot, waited = await self.take_slot(model, slots, admission)
        try:
            self.started(model)
            started = time.monotonic()
            ends = None if self.call_deadline is None else started + self.call_deadline - waited
            async with self.generating(hold) as took:
                reply, done = await self._attempts(model, request, turn, retries, ends, slots, started, took)
        finally:
            if slot is not None:
                slot.release()
            if admission is not None:
                admission.close()  # a failed call adds nothing; a read one was closed with its cost
        if slots is not None:
            slots.succeeded()
        if cached is not None:
            cached.keep(model, done)
        self.after_call(done, time.monotonic() - started, model, messages, offered=offered)
        return reply

    @contextlib.asynccontextmanager
    async def generating(self, hold: bool = True) -> AsyncIterator[list[float]]:
        """Around one call's requests: the simulated clocks stand still (unless not `hold`), then move on by the
        seconds the caller puts in the list it is given (the successful request's), else by all the seconds it
        took."""
        clocks = self.clocks if hold else []
        for clock in clocks:
            await clock.pause()
        started, took = time.monotonic(), list[float]()
        try:
            yield took
        finally:
            for clock in clocks:
                await clock.resume(took[-1] if took else time.monotonic() - started)

    async def _attempts(self, model: str, request: Callable[[], Awaitable[T]], turn: Callable[[T], dict[str, Any]],
                        retries: int, ends: float | None, slots: Slots | None, started: float,
                        took: list[float]) -> tuple[T, dict[str, Any]]:
        """The call's request, tried again after each 429/503 waited out (`pace`), else its error mapped;
        `took` gets the seconds of the one that succeeded."""
        for attempt in itertools.count():
            sent, tried = time.time(), time.monotonic()
            try:
                reply = await asyncio.wait_for(request(), None if ends is None else max(ends - time.monotonic(), 0))
                took.append(time.monotonic() - tried)
                return reply, turn(reply)
            except Exception as exc:  # noqa: BLE001 - classified by pace, then model_error
                if await self.pace(model, exc, attempt, retries, ends, slots, sent):
                    continue
                mapped = self.model_error(exc, model, f"no reply within {time.monotonic() - started:.0f} s "
                                                      f"(the client's timeout and retries included){self.whence()}")
                if mapped is exc:
                    raise
                raise mapped from exc
        raise AssertionError("unreachable: itertools.count() never ends")

    async def pace(self, model: str, exc: Exception, attempt: int, retries: int, ends: float | None,
                   slots: Slots | None, sent: float) -> bool:
        """After a failed try (`attempt`, 0 first, sent at wall-clock `sent`): True once a 429/503 has been
        waited out as the provider asked (models/pacing.py), for the call to try again; False for any
        other failure. A 429 lowers the model's cap on calls in flight. Raises Unpaced when the wait does
        not fit before `ends` (monotonic; None: no deadline) or the `retries` are spent."""
        ask = asked(exc)
        if ask is None:
            return False
        if ask.status == 429 and slots is not None:
            slots.throttled(sent)
        if attempt >= retries:
            raise self.failed(retries_spent(model, ask, retries, exc)) from exc
        wait = ask.wait(attempt)
        left = None if ends is None else ends - time.monotonic()
        if left is not None and wait > left:
            raise self.failed(not_waited(model, ask, wait, max(left, 0.0), self.call_deadline or 0.0)) from exc
        if self.tracer is not None:
            self.tracer.emit(ModelWait(model=model, status=ask.status, asked=ask.said, seconds=round(wait, 3),
                                       retry=attempt + 1, **actor()))
        await asyncio.sleep(wait)
        return True

    async def take_slot(self, model: str, slots: Slots | None,
                        admission: Admission | None = None) -> tuple[Slot | None, float]:
        """Wait for one of the model's slots (None: no cap), at most the call's deadline; returns the
        slot and the seconds waited. A waiting call is not a model call yet: it is neither traced as
        started nor counted. No slot within the deadline is the model's failure (its calls are slow);
        the call's `admission` then ends with it."""
        if slots is None:
            return None, 0.0
        begun = time.monotonic()
        try:
            slot = await slots.acquire(self.call_deadline)
        except TimeoutError:
            if admission is not None:
                admission.close()
            cap = slots.cap()
            held = f"{slots.count} of max_connections" if cap >= slots.count else \
                f"{cap} of the cap in force (max_connections {slots.count}, lowered after 429s)"
            raise self.failed(ModelError(
                f"model {model}: no free connection within {time.monotonic() - begun:.0f} s (the call's "
                f"deadline): all {held} were in use by the run's other calls")) from None
        return slot, time.monotonic() - begun

    def whence(self) -> str:
        """Where the call's deadline comes from, for a call cut at it (a user sees 35 s where the section says 120)."""
        if self.call_deadline is None:
            return ""
        return (f": one call's deadline is {self.call_deadline:.0f} s, {MODEL_SHARE:g} of --instance-timeout "
                f"{self.call_deadline / MODEL_SHARE:.0f} (a section's longer timeout is cut to it); a longer "
                "--instance-timeout gives each call longer")

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
            self.tracer.emit(ModelCallStarted(model=model, timeout=self.request_timeout, at=time.time(), **actor()))

    def failed(self, exc: ModelError) -> ModelError:
        """Remember and trace a failed call; returns it to be raised."""
        self.model_failure = exc
        if self.tracer is not None:
            self.tracer.emit(ErrorEvent(kind="model", message=str(exc), traceback=traceback.format_exc()))
        return exc

    def after_call(self, turn: dict[str, Any], seconds: float, model: str,
                   messages: list[dict[str, Any]] | None = None, cached: bool = False,
                   offered: Collection[str] = ()) -> None:
        """turn: the reply in replay form ({content} or {tool_calls}, with usage: harness/usage.py's
        classes); messages: the request; `cached`: answered by the --cache (its tokens count, at $0);
        `offered`: the request's tool names (a reply that is a call of one written as text is marked)."""
        usage = counts(turn.get("usage"))
        cost = 0.0 if cached else self.charge(usage, model)
        with self._lock:
            self.totals += Usage(**usage, llm_calls=1, cost=cost, cache_hits=int(cached))
        if self.tracer is not None:
            new = [m for m in messages or [] if self.tracer.new_text(m.get("content"))]
            self.tracer.emit(ModelCall(model=model, seconds=round(seconds, 4), usage=usage,
                                       content=turn.get("content"), tool_calls=turn.get("tool_calls"),
                                       n_messages=None if messages is None else len(messages), messages=new,
                                       cached=cached, text_tool_call=None if turn.get("tool_calls") else
                                       text_tool_call(turn.get("content"), offered),
                                       finish_reason=turn.get("finish_reason"),
                                       response_model=None if cached else turn.get("response_model"),
                                       fingerprint=None if cached else turn.get("fingerprint"),
                                       sampling=None if cached else turn.get("sampling"), **actor()))

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
        return self.totals.model_copy()


def describe(model: str, exc: BaseException) -> str:
    """A failed call in words: the client's own error as it is, anything else as an unreadable reply."""
    what = f"{type(exc).__name__}: {exc}"
    if (type(exc).__module__ or "").startswith(MODEL_CLIENT_MODULES):
        return f"model {model}: {what}"
    return f"model {model}: the reply could not be read as a chat completion ({what})"
