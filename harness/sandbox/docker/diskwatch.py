"""--disk on a writable root filesystem without a storage quota: the container's writable layer, watched.

A sandbox with `SandboxSpec.writable_root` on an engine without a storage quota (storage.py's tmpfs backend)
writes into its writable layer on the engine's disk. The kernel stops any one file at the layer's bound
(RLIMIT_FSIZE, storage.py); the layer as a whole is watched by the process that started it. The watcher asks the
engine for the layer's size (`SizeRw` of an inspect with size) at least every POLL_S seconds, and sooner when the
engine's disk fills: where this host sees the engine's data root (a local engine), one statvfs of it every TICK_S
seconds, and once the disk has grown by half the room the layer had left at the last ask, it asks again
(never busier than one ask in three of the engine's time: an ask walks the layer, ~2 ms empty, ~230 ms for
50,000 files; a watcher at rest costs ~0.2% of a core). At or past its share of --disk the container is renamed
to DISK_LIMIT_NAME + its id (the mark, kept by the engine, that any process attached to it reads:
engine.raise_if_dead raises SandboxDiskLimit) and killed, and its removal at teardown takes the layer with it.

What this bounds, measured by bench/diskwatch.py: one file at full speed stops at the bound exactly; many files
at full speed overshoot it by what is written before the next ask. Where the data root is not seen (a remote
engine) only POLL_S is left, and what one poll lets through is the disk's speed for POLL_S.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable

from harness.errors import EngineNotFound, InfraError
from harness.sandbox.docker import engine

log = logging.getLogger(__name__)

POLL_S = 0.5
TICK_S = 0.01
_watchers: dict[str, threading.Event] = {}
_lock = threading.Lock()


def layer_size(container_id: str) -> int:
    """The container's writable layer in bytes, as the engine counts it (SizeRw)."""
    api = engine.client().api
    found = engine.call("inspect", lambda: api.containers(all=True, size=True, filters={"id": container_id}))
    if not found:
        raise EngineNotFound(f"sandbox {container_id[:12]} is gone")
    return int(found[0].get("SizeRw") or 0)


def engine_disk_used() -> Callable[[], int] | None:
    """Bytes in use on the filesystem of the engine's data root (one statvfs a call); None when this host does not
    see it (a remote engine, or one whose root is not mounted here)."""
    root = engine.info().get("DockerRootDir") if engine.engine_is_local() else None
    if not root or not os.path.isdir(root):
        return None
    return lambda: shutil.disk_usage(root).used


def watch(container_id: str, limit: int, *, poll: float = POLL_S) -> None:
    """Watch the container's writable layer against `limit` bytes until `stop` (or its end)."""
    done = threading.Event()
    with _lock:
        _watchers[container_id] = done
    threading.Thread(target=_run, args=(container_id, limit, poll, done, engine_disk_used()), daemon=True,
                     name=f"diskwatch-{container_id[:12]}").start()


def stop(container_id: str) -> None:
    with _lock:
        done = _watchers.pop(container_id, None)
    if done is not None:
        done.set()


class Schedule:
    """When to ask the layer's size next: POLL_S after the last ask, or sooner once the engine's disk has grown by
    half the room the layer had left then; never sooner than twice the last ask's own time after it."""

    def __init__(self, limit: int, poll: float, disk: Callable[[], int] | None, now: float) -> None:
        self.limit, self.poll, self.disk = limit, poll, disk
        self.size, self.asked_at, self.cost = 0, now, 0.0
        self.used = disk() if disk else 0

    def due(self, now: float) -> bool:
        since = now - self.asked_at
        if since >= self.poll:
            return True
        if self.disk is None or since < 2 * self.cost:
            return False
        return self.disk() - self.used >= (self.limit - self.size) / 2

    def asked(self, size: int, started: float, now: float) -> None:
        self.size, self.asked_at, self.cost = size, now, now - started
        self.used = self.disk() if self.disk else 0


def _run(container_id: str, limit: int, poll: float, done: threading.Event, disk: Callable[[], int] | None) -> None:
    schedule = Schedule(limit, poll, disk, time.monotonic())
    while not done.wait(TICK_S if disk else poll):
        if not schedule.due(time.monotonic()):
            continue
        started = time.monotonic()
        try:
            size = layer_size(container_id)
        except EngineNotFound:
            return
        except InfraError as exc:  # a busy engine: the next poll asks again
            log.info("the size of sandbox %s's writable layer is unknown for now: %s", container_id[:12], exc)
            schedule.asked(schedule.size, started, time.monotonic())
            continue
        schedule.asked(size, started, time.monotonic())
        if size >= limit:
            log.info("sandbox %s wrote %d bytes outside its tmpfs places, at or beyond --disk's %d: killed",
                     container_id[:12], size, limit)
            _end(container_id)
            return


def _end(container_id: str) -> None:
    api = engine.client().api
    try:
        engine.call("rename", lambda: api.rename(container_id, engine.DISK_LIMIT_NAME + container_id[:12]))
        engine.call("kill", lambda: api.kill(container_id))
    except EngineNotFound:
        pass
    except InfraError as exc:  # stopped meanwhile, or the engine's trouble: teardown removes it anyway
        log.warning("could not end sandbox %s past its disk limit: %s", container_id[:12], exc)
