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
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import os
import random
import time
from pathlib import Path

from harness.fsutil import slug

FIRST_PAUSE = 0.01  # seconds between the first rounds of tries
LONGEST_PAUSE = 0.2  # the longest pause: a freed slot waits at most about this long


def slots_directory(root: str | Path, model: str) -> Path:
    """The directory of a model's slot files under the run's slot directory (a readable name plus a
    hash, so two model names that read alike never share slots)."""
    digest = hashlib.sha256(model.encode()).hexdigest()[:8]
    return Path(root) / f"{slug(model, 40)}-{digest}"


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
        """A free slot, taken now, or None when all are held."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        first = random.randrange(self.count)  # a random start spreads waiters over the slots
        for step in range(self.count):
            index = (first + step) % self.count
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
                    raise TimeoutError(f"all {self.count} slots in {self.directory} stayed taken for {timeout} s")
            nap = pause * random.uniform(0.5, 1.0)
            await asyncio.sleep(nap if deadline is None else min(nap, max(left, 0.0)))
            pause = min(pause * 2, LONGEST_PAUSE)
