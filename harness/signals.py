"""SIGTERM and SIGHUP end a run the way Ctrl-C does.

`timeout`, CI systems and schedulers stop a job with SIGTERM (a closed terminal sends
SIGHUP). Inside `interrupts()` either raises `Terminated` (a KeyboardInterrupt) in the
main thread, so the one interrupt path runs: agents are killed, this run's sandboxes
removed, finished rows kept. A second SIGTERM/SIGHUP is ignored so that clean-up can
finish; Ctrl-C keeps Python's own meaning. The exit code is 128 + the signal's number.

A run started with SIGINT ignored (a script's `harness run &` without job control, some CI
runners and schedulers: Python then leaves it ignored) still takes SIGINT as Ctrl-C inside the
block, as Go programs such as the docker CLI do: a `kill -INT` must not leave a run going, its
sandboxes with it, while the sender waits for the clean-up it asked for.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from harness import exit_codes

CAUGHT = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """A SIGTERM or SIGHUP, raised where a Ctrl-C would be."""

    def __init__(self, signum: int):
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


def stopped_by(exc: KeyboardInterrupt) -> str:
    """What ended the run, in words: "stopped by Ctrl-C (SIGINT)" or "stopped by SIGTERM"."""
    signum = getattr(exc, "signum", signal.SIGINT)
    return "stopped by Ctrl-C (SIGINT)" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"


def exit_code(exc: KeyboardInterrupt) -> int:
    return exit_codes.signalled(getattr(exc, "signum", signal.SIGINT))


@contextmanager
def interrupts() -> Iterator[None]:
    """SIGTERM/SIGHUP raise Terminated in the main thread inside the block (elsewhere: no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum, frame):  # noqa: ARG001
        for each in CAUGHT:  # the first one starts the clean-up; later ones must not cut it short
            signal.signal(each, signal.SIG_IGN)
        raise Terminated(signum)

    previous = {each: signal.signal(each, handle) for each in CAUGHT}
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)
