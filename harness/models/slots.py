"""A per-model cap on concurrent model calls across every agent process of a run.

Each instance's agent runs in a process of its own, so an in-process semaphore cannot
keep a run with many workers under a provider's rate limit. Instead a model has N slot
files in a directory of the run (`<run>/.harness-tmp/model-slots/<model>/slot-<i>.lock`,
N = its section's `max_connections`); a call holds a slot while it holds an exclusive
`flock` on that slot's file. The kernel drops a lock when its holder's descriptor is
closed, also when the process is SIGKILLed or crashes, so a dead agent never keeps a
slot: no lease, no cleanup, no stale-lock detection.

Waiting polls the slots without blocking (a blocking flock could not be given up at the
call's deadline, nor cancelled with the agent's task): each round tries every slot,
starting at a random one, then sleeps a short, growing, jittered interval (10 ms up to
0.2 s), so waiters neither spin nor wake in lockstep, and a freed slot is taken within
about 0.2 s. The order among waiters is not strictly first come, first served.

Adaptive concurrency (AIMD): the cap in force is at most `max_connections` and is kept in the
directory's `cap.json` ({cap, successes, cut_at}), shared by every process like the slots; new
calls take only slots below it (calls already holding a higher slot finish: the cap in flight
drains down to it). A 429 (models/pacing.py, `throttled`) halves it, down to 1; only once per
burst: a 429 to a request sent before the last cut is no news about the new cap. Each success
(`succeeded`) counts, and after as many successes in a row as the cap in force it is raised by
one, back up to `max_connections` (1 -> 8 takes 1 + 2 + ... + 7 = 28 calls). Updates are made
under an flock of `cap.lock` and written atomically; at the full cap a success writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

from harness.fsutil import slug, write_atomic

FIRST_PAUSE = 0.01  # seconds between the first rounds of tries
LONGEST_PAUSE = 0.2  # the longest pause: a freed slot waits at most about this long


def slots_directory(root: str | Path, model: str) -> Path:
    """The directory of a model's slot files under the run's slot directory (a readable name plus a
    hash, so two model names that read alike never share slots)."""
    digest = hashlib.sha256(model.encode()).hexdigest()[:8]
    return Path(root) / f"{slug(model, 40)}-{digest}"


def cap_words(root: str | Path, model: str, count: int) -> str:
    """The progress line's note of a model's cap in force while 429s hold it below `count` ("" at the full cap)."""
    cap = Slots(slots_directory(root, model), count).cap()
    return "" if cap >= count else f", {model} cap {cap}/{count} after 429s"


class Slot:
    """One held slot; `release` (or leaving the `with` block) frees it, and so does the process dying."""

    def __init__(self, fd: int, index: int):
        self._fd: int | None = fd
        self.index = index

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __del__(self) -> None:  # a slot dropped unreleased must not stay taken while this process lives
        try:
            self.release()
        except Exception:  # noqa: BLE001 - at interpreter exit; the kernel frees the lock anyway
            pass

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class Slots:
    """`count` slots in `directory`, shared by every process that opens the same directory."""

    def __init__(self, directory: str | Path, count: int):
        if count < 1:
            raise ValueError(f"at least one slot is needed, not {count}")
        self.directory, self.count = Path(directory), count

    def try_acquire(self) -> Slot | None:
        """A free slot below the cap in force, taken now, or None when all those are held."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        cap = self.cap()
        first = random.randrange(cap)  # a random start spreads waiters over the slots
        for step in range(cap):
            index = (first + step) % cap
            fd = os.open(self.directory / f"slot-{index}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    continue
                raise
            return Slot(fd, index)
        return None

    def cap(self) -> int:
        """The cap in force now (adaptive: at most `count`)."""
        return self._state()["cap"]

    def throttled(self, sent: float) -> None:
        """A 429 answered a request sent at wall-clock `sent`: halve the cap, unless it was cut since."""
        with self._updating() as state:
            if sent >= state["cut_at"]:
                state.update(cap=max(1, state["cap"] // 2), successes=0, cut_at=time.time())

    def succeeded(self) -> None:
        """A call succeeded: below the full cap, count it, and raise the cap by one after `cap` in a row."""
        if self.cap() >= self.count:
            return
        with self._updating() as state:
            state["successes"] += 1
            if state["successes"] >= state["cap"]:
                state.update(cap=min(self.count, state["cap"] + 1), successes=0)

    def _state(self) -> dict:
        try:
            state = json.loads((self.directory / "cap.json").read_text())
            cap = min(self.count, max(1, int(state["cap"])))
            return {"cap": cap, "successes": int(state["successes"]), "cut_at": float(state["cut_at"])}
        except (OSError, ValueError, KeyError, TypeError):  # none yet (or unreadable): the full cap
            return {"cap": self.count, "successes": 0, "cut_at": 0.0}

    @contextlib.contextmanager
    def _updating(self) -> Iterator[dict]:
        """The state, under the directory's update lock, written back (atomically) when it changed."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.directory / "cap.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held for a read and a write of a few bytes
            state = self._state()
            before = dict(state)
            yield state
            if state != before:
                write_atomic(self.directory / "cap.json", json.dumps(state), durable=False)
        finally:
            os.close(fd)

    async def acquire(self, timeout: float | None = None) -> Slot:
        """Wait for a slot; TimeoutError after `timeout` seconds (None: as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = FIRST_PAUSE
        while True:
            slot = self.try_acquire()
            if slot is not None:
                return slot
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"all {self.cap()} slots in force in {self.directory} stayed taken "
                                       f"for {timeout} s")
            nap = pause * random.uniform(0.5, 1.0)
            await asyncio.sleep(nap if deadline is None else min(nap, max(left, 0.0)))
            pause = min(pause * 2, LONGEST_PAUSE)
