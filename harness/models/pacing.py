"""Pacing: a provider's 429 or 503 is waited out as it asks, when the wait fits in the call's deadline.

The SDKs' own retry loops cannot keep a call's deadline: the openai SDK obeys `Retry-After` only up
to 60 s (a longer ask falls back to its own 0.5-8 s backoff, so the retries run out in seconds while
the provider asked for 90), and the anthropic SDK waits whatever it is asked, past any deadline. So
the HTTP clients of metered calls (models/http.py, `paced=True`: the plain runner's and AutoGen's
clients, every provider) mark each 429 and 503 answer `x-should-retry: false`, which both SDKs obey,
and the Meter (models/meter.py) retries those itself, holding the call's slot:

- the wait is what the answer asks (`asked`): `retry-after-ms` (milliseconds), else `Retry-After`
  in seconds or as an HTTP date; an answer that asks nothing waits the SDKs' backoff (0.5 s
  doubling, at most 8 s, less up to a quarter of jitter);
- a wait that does not fit in what is left of the call's deadline is not begun: the call fails at
  once with `Unpaced`, a ModelError saying what the provider answered and asked for, and how much of
  the deadline was left;
- at most the section's `max_retries` such retries per call, then `Unpaced` naming the last ask;
- each wait is traced (`model_wait`), and a 429 lowers the model's cap on calls in flight
  (models/slots.py, adaptive concurrency).

Other failures (408, 409, other 5xx, dropped connections) stay the SDK's own retries. The judge and
the preflight probe keep the SDKs' retries (no call deadline there).
"""

from __future__ import annotations

import email.utils
import random
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import ModelError

PACED_STATUSES = (429, 503)  # answers the Meter retries itself
FIRST_BACKOFF, LONGEST_BACKOFF = 0.5, 8.0  # seconds, when the provider asks for no wait (as the SDKs do)
_SDKS = ("openai", "anthropic")  # whose APIStatusError carries the answer


class Unpaced(ModelError):
    """A 429/503 not waited out: its wait did not fit in the call's deadline, or the retries ran out."""


@dataclass(frozen=True)
class Ask:
    """What a 429 or 503 answer asked for."""

    status: int
    seconds: float | None  # the wait asked for (None: the answer names none)
    said: str  # the header as sent, e.g. "Retry-After: 70" ("" when none)

    def wait(self, attempt: int) -> float:
        """Seconds to wait before retry number `attempt` (0 first): as asked, else the backoff."""
        if self.seconds is not None:
            return self.seconds
        return min(FIRST_BACKOFF * 2**attempt, LONGEST_BACKOFF) * (1 - 0.25 * random.random())

    def describe(self) -> str:
        asked = f"asked to wait {self.said}" if self.said else "asked for no particular wait"
        return f"HTTP {self.status} ({asked})"


def asked(exc: BaseException | None) -> Ask | None:
    """The 429/503 answer behind a failed call (the SDK's status error, however wrapped), or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for sdk in _SDKS:
            module = sys.modules.get(sdk)  # an SDK not imported raised nothing
            if module is not None and isinstance(exc, module.APIStatusError):
                if exc.status_code not in PACED_STATUSES:
                    return None
                return ask_of(exc.status_code, exc.response.headers)
        exc = exc.__cause__ or exc.__context__
    return None


def ask_of(status: int, headers: Mapping[str, str]) -> Ask:
    """The wait an answer's headers ask for (`retry-after-ms`, else `Retry-After` in seconds or a date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return Ask(status, max(float(millis) / 1000, 0.0), f"retry-after-ms: {millis}")
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return Ask(status, None, "")
    said = f"Retry-After: {value}"
    try:
        return Ask(status, max(float(value), 0.0), said)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return Ask(status, None, said)  # unreadable: as if nothing were asked
    return Ask(status, max(when - time.time(), 0.0), said)


def leave_to_meter(response: Any) -> None:
    """An HTTP client's response hook: a 429 or 503 is marked for the SDK not to retry (the Meter does)."""
    if response.status_code in PACED_STATUSES:
        response.headers["x-should-retry"] = "false"


def not_waited(model: str, ask: Ask, wait: float, left: float, deadline: float) -> Unpaced:
    return Unpaced(f"model {model}: the provider answered {ask.describe()}, a wait of {wait:.0f} s, "
                   f"more than the {left:.0f} s left of the call's {deadline:.0f} s deadline (half of "
                   "--instance-timeout): not waited")


def retries_spent(model: str, ask: Ask, retries: int, cause: BaseException) -> Unpaced:
    return Unpaced(f"model {model}: the provider answered {ask.describe()} again after {retries} "
                   f"retries (max_retries = {retries}): {type(cause).__name__}: {cause}")
