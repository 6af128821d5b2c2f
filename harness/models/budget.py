"""The run's spend against `--max-cost`, shared by every agent process and the harness's own.

Agents run in processes of their own (runner/agent_process/), so the spend lives in the run
directory (`<run>/.harness-tmp/budget/`), as the call slots do (models/slots.py): `spend.json`
holds the dollars spent so far by this invocation (the agents' calls as each one ends, the
judge's as the harness scores) and the costliest call so far; it is read and written only while
holding an exclusive `flock` on `spend.lock`. Each call in flight holds a lock on a file of its own
in `flight/`: the kernel drops it when its process dies, so a killed agent's call stops counting as
in flight (its file is removed by the next admission that finds it unlocked).

Admission (`admit`, before every model call, after --max-steps/--max-tokens): under the lock,
- spent >= the budget: LimitExceeded("max_cost") (the instance ends as a `limit` row, scored);
- no other call in flight: admitted (the one call the budget may be exceeded by);
- else admitted when spent + (calls in flight + 1) x the costliest call so far stays within the
  budget; otherwise it waits (a short jittered poll, like the slots) until the calls in flight end.
No call is known yet (the run's first): it goes alone.
So calls run concurrently while the budget is far, and one at a time near it: the run spends at most
the budget plus one call, as long as no call in flight costs more than the costliest one before it
(the estimate each reserves). A call's cost is added as it ends (`Admission.close`); a call that fails
adds nothing; a killed agent's call in flight adds nothing (its provider may still bill it).

The harness's process (runner/evaluate.py) starts no instance once `spent()` reaches the budget:
the spend already holds every running instance's cost so far. The LLM judge scorer's calls (`add`, made by the
harness once per scored instance) are never refused: a finished instance is always scored, and its judge's
cost counts toward the budget. Every paid call asked from inside an instance (a Gaia2 judge's through the
bridge, a transcription, a paid search: models/meter.py `paying`) is admitted like a model call
(`admit_waiting`, from the thread that makes it), so none of them can spend past the budget either.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import os
import random
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from harness.errors import LimitExceeded

FIRST_PAUSE, LONGEST_PAUSE = 0.01, 0.2  # seconds between admission tries, growing to at most this


class BudgetSpec(BaseModel):
    """Where the run keeps its spend, and the budget (dollars)."""

    directory: str
    limit: float


class Admission:
    """One admitted call: `close(cost)` adds its cost to the spend and ends it in flight."""

    def __init__(self, budget: RunBudget, fd: int, path: Path):
        self._budget, self._path = budget, path
        self._fd: int | None = fd

    def close(self, cost: float = 0.0) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with self._budget.locked() as state:
                state["spent"] += cost
                state["largest"] = max(state["largest"], cost)
                self._budget.save(state)
                with contextlib.suppress(OSError):
                    self._path.unlink()
        finally:
            os.close(fd)  # the flight lock goes with it


class RunBudget:
    def __init__(self, spec: BudgetSpec):
        self.limit = spec.limit
        self.directory = Path(spec.directory)
        self.flights = self.directory / "flight"

    @contextlib.contextmanager
    def locked(self) -> Iterator[dict[str, float]]:
        """The spend, read under the exclusive lock held for the block."""
        self.flights.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.directory / "spend.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                state = json.loads((self.directory / "spend.json").read_text())
            except (OSError, ValueError):
                state = {}
            yield {"spent": float(state.get("spent", 0.0)), "largest": float(state.get("largest", 0.0))}
        finally:
            os.close(fd)

    def save(self, state: dict[str, float]) -> None:
        """Write the spend (under `locked`): a small file replaced whole."""
        scratch = self.directory / f"spend.{os.getpid()}.tmp"
        scratch.write_text(json.dumps(state))
        scratch.replace(self.directory / "spend.json")

    def spent(self) -> float:
        with self.locked() as state:
            return state["spent"]

    def reached(self) -> bool:
        return self.spent() >= self.limit

    def add(self, cost: float) -> None:
        """Spend made outside any agent (the judge's calls): counted, never refused."""
        if cost > 0:
            with self.locked() as state:
                state["spent"] += cost
                self.save(state)

    async def admit(self) -> Admission:
        """Admit one call (the rules above), waiting while the calls in flight could take the spend past
        the budget; LimitExceeded("max_cost") once it is reached."""
        pause = FIRST_PAUSE
        while True:
            admitted = self._try_admit()
            if admitted is not None:
                return admitted
            await asyncio.sleep(pause * random.uniform(0.5, 1.0))
            pause = min(pause * 2, LONGEST_PAUSE)

    def admit_waiting(self) -> Admission:
        """`admit`, for a call made in a thread of its own (a tool's, a judge's): it waits by sleeping."""
        pause = FIRST_PAUSE
        while (admitted := self._try_admit()) is None:
            time.sleep(pause * random.uniform(0.5, 1.0))
            pause = min(pause * 2, LONGEST_PAUSE)
        return admitted

    def _try_admit(self) -> Admission | None:
        with self.locked() as state:
            spent, largest = state["spent"], state["largest"]
            if spent >= self.limit:
                raise LimitExceeded("max_cost", f"the run spent ${spent:.4f}, budget --max-cost ${self.limit:g}")
            flying = self._in_flight()
            if flying and (largest <= 0 or spent + (flying + 1) * largest > self.limit):
                return None
            path = self.flights / f"{os.getpid()}-{secrets.token_hex(4)}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            return Admission(self, fd, path)

    def _in_flight(self) -> int:
        """Calls in flight now (under `locked`): flight files locked by a live process; a dead one's are removed."""
        live = 0
        for path in self.flights.iterdir():
            try:
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                live += 1
            else:
                with contextlib.suppress(OSError):
                    path.unlink()  # its caller died mid-call
            finally:
                os.close(fd)
        return live
