"""Death with the parent, for the agent process and the fork server alike: the one place it is done.

`die_with(parent)` makes the kernel SIGKILL this process when its parent ends (PR_SET_PDEATHSIG), and
exits at once (code 1) if the parent is already gone: it died before the call took effect and this
process was re-parented. It is the first thing a fresh agent process does, before its imports, so a
harness SIGKILLed meanwhile leaves nothing behind.

With `watch=True` a daemon thread also checks every 0.5 s that the parent is still the given pid
(PR_SET_PDEATHSIG fires when the parent's *thread* that started this process ends, not only the
process). The fork server holds no thread (it forks), so it does not watch: its loop asks `orphaned`.
The parent's pid is always given by the caller, never read from the command line here.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

PR_SET_PDEATHSIG = 1
WATCH_EVERY_S = 0.5


def orphaned(parent: int) -> bool:
    """True once this process's parent is no longer `parent` (it died; this process was re-parented)."""
    return os.getppid() != parent


def die_with(parent: int, *, watch: bool = False) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if orphaned(parent):
        os._exit(1)  # the parent died before the line above took effect
    if watch:
        threading.Thread(target=_watch, args=(parent,), name="parent-watch", daemon=True).start()


def _watch(parent: int) -> None:
    while True:
        time.sleep(WATCH_EVERY_S)
        if orphaned(parent):
            os._exit(1)  # orphaned: the harness run was killed
