"""Waiting in tests: poll for a condition until a deadline, never sleep-and-hope.

A test that sleeps a fixed time and then asserts is a guess about how fast a loaded machine
is: too short and it fails at random, too long and it is slow, and a check made before the
thing happened can pass without testing anything. So:

- `wait_for(predicate, timeout, what)`: call `predicate` every `every` seconds until it returns
  something truthy (returned), else AssertionError naming `what`, the timeout and the last value
  the predicate returned (or raised). The timeout is a bound for a loaded 2-core machine, not
  an expectation: pass what the slowest honest case needs.
- `holds_for(predicate, seconds, what)`: that something does NOT happen is only shown by watching
  for a while: `predicate` must stay truthy for the whole `seconds` (checked every `every`);
  AssertionError at the first time it is not. Use it where the behaviour is "still waiting".
- `steady(read, quiet, timeout, what)`: the value of `read()` once it has not changed for `quiet`
  seconds (a log still being written, containers a killed process's requests may still make).
- `ends_within(fn, seconds, what)`: a blocking call that must end: what `fn()` returned or raised,
  or AssertionError naming `what` when it has not ended in `seconds` (it is left in a daemon thread).
A sleep that makes time pass on purpose (a timeout under test, a stimulus) is not synchronisation
and stays a sleep, with a comment saying so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, what: str, *, every: float = 0.05) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            last: object = predicate()
        except Exception as exc:  # noqa: BLE001 - not yet: reported if it is still so at the deadline
            last = exc
        else:
            if last:
                return last  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")
        time.sleep(every)


def holds_for(predicate: Callable[[], object], seconds: float, what: str, *, every: float = 0.05) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if not predicate():
            raise AssertionError(f"{what}: no longer so after {seconds - (deadline - time.monotonic()):.2f} s")
        if time.monotonic() >= deadline:
            return
        time.sleep(every)


def steady(read: Callable[[], T], quiet: float, timeout: float, what: str, *, every: float = 0.1) -> T:
    value, since = read(), time.monotonic()

    def unchanged_for_quiet() -> bool:
        nonlocal value, since
        now = read()
        if now != value:
            value, since = now, time.monotonic()
        return time.monotonic() - since >= quiet

    wait_for(unchanged_for_quiet, timeout, f"{what} to stay the same for {quiet:g} s", every=every)
    return value


def ends_within(fn: Callable[[], T], seconds: float, what: str) -> T:
    done: dict[str, object] = {}

    def work() -> None:
        try:
            done["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            done["error"] = exc

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise AssertionError(f"{what} has not ended after {seconds:g} s")
    if "error" in done:
        raise done["error"]  # type: ignore[misc]
    return done["value"]  # type: ignore[return-value]
