"""A warm pool of started sandboxes (`harness run --warm-pool N`), so an instance need not wait
for a container to start.

Rules:
- Up to N sandboxes are kept started ahead of the instances, from the run's own sandbox
  settings (image, limits, network policy). They carry the run's labels like every sandbox
  (instance id "warm": a container's labels are fixed when it is made; the row's `sandbox`
  names the one an instance used), so `harness cleanup` and the leak audit treat them alike.
- `take` hands out a started sandbox or None (the pool is empty: start one cold). A sandbox
  is handed out once and never comes back: the instance's runner tears it down as usual, and
  the pool starts a replacement.
- It never starts more sandboxes than instances remain to use them: `total` at most in all, less
  one for each instance that started cold (`started_cold`); then its fillers stop.
- A start that fails is logged and retried after a pause (the cold path still works).
- `close` (the run's end, Ctrl-C included) stops refilling and removes every sandbox not
  handed out, including one whose start was under way.
"""

from __future__ import annotations

import logging
import queue
import threading

from harness.sandbox.contract import Sandbox, SandboxProvider, SandboxSpec

log = logging.getLogger(__name__)
RETRY_PAUSE_S = 2.0


class WarmPool:
    def __init__(self, provider: SandboxProvider, spec: SandboxSpec, size: int, *, total: int | None = None,
                 fillers: int = 2):
        self.provider, self.spec, self.size = provider, spec, size
        self._budget = float("inf") if total is None else total  # sandboxes it may still start
        self._ready: queue.SimpleQueue[Sandbox] = queue.SimpleQueue()
        self._room = threading.Semaphore(size)  # one permit per sandbox the pool may still start
        self._closed = threading.Event()
        self._count = 0
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._fill, name=f"warm-pool-{i}", daemon=True)
                         for i in range(max(1, min(fillers, size)))]
        for thread in self._threads:
            thread.start()

    def _fill(self) -> None:
        while not self._closed.is_set():
            if not self._room.acquire(timeout=0.5):
                continue
            with self._lock:
                if self._budget <= 0:  # every remaining instance has (or will get) a sandbox
                    self._room.release()
                    return
                self._budget -= 1
                self._count += 1
                spec = self.spec.model_copy(update={"attempt": self._count})
            try:
                sandbox = self.provider.start(spec)
            except Exception as exc:  # noqa: BLE001 - instances start cold meanwhile
                log.warning("warm pool: could not start a sandbox (%s); retrying", exc)
                with self._lock:
                    self._budget += 1
                self._room.release()
                self._closed.wait(RETRY_PAUSE_S)
                continue
            if self._closed.is_set():
                self._remove(sandbox)
                return
            self._ready.put(sandbox)

    def ready(self) -> int:
        """Started sandboxes waiting to be taken."""
        return self._ready.qsize()

    def take(self) -> Sandbox | None:
        """A started sandbox, for one instance only; None when none is ready."""
        if self._closed.is_set():
            return None
        try:
            sandbox = self._ready.get_nowait()
        except queue.Empty:
            return None
        self._room.release()  # a replacement may start
        return sandbox

    def started_cold(self) -> None:
        """An instance found the pool empty and started its own: one sandbox fewer to make."""
        with self._lock:
            self._budget -= 1

    def _remove(self, sandbox: Sandbox) -> None:
        try:
            self.provider.teardown(sandbox)
        except Exception as exc:  # noqa: BLE001 - the leak audit and `harness cleanup` are the backstop
            log.warning("warm pool: could not remove %s: %s", sandbox.name, exc)

    def close(self) -> None:
        self._closed.set()
        for thread in self._threads:
            thread.join()
        while True:
            try:
                self._remove(self._ready.get_nowait())
            except queue.Empty:
                return

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
