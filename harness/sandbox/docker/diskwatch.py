"""--disk on a writable root filesystem without a storage quota: the container's writable layer, watched.

A sandbox with `SandboxSpec.writable_root` on an engine without a storage quota (storage.py's tmpfs backend)
writes into its writable layer on the engine's disk, which nothing bounds. The process that started it polls
the layer's size as the engine reports it (`SizeRw` of an inspect with size) every POLL_S seconds; past its
share of --disk the container is renamed to DISK_LIMIT_NAME + its id (the mark, kept by the engine, that any
process attached to it reads: engine.raise_if_dead raises SandboxDiskLimit) and killed. The bound is polled:
what is written between two polls (at the disk's speed, for POLL_S) overshoots it until the kill, and the
container's removal at teardown takes the layer with it. Measured here: a `dd` at full speed past a 192 MiB bound
was killed at 346-440 MiB with POLL_S 0.5 (293 at 0.25, 423 at 1.0); one size ask took ~48 ms for a layer of
5,000 files.
"""

from __future__ import annotations

import logging
import threading

from harness.errors import EngineNotFound, InfraError
from harness.sandbox.docker import engine

log = logging.getLogger(__name__)

POLL_S = 0.5
_watchers: dict[str, threading.Event] = {}
_lock = threading.Lock()


def layer_size(container_id: str) -> int:
    """The container's writable layer in bytes, as the engine counts it (SizeRw)."""
    api = engine.client().api
    found = engine.call("inspect", lambda: api.containers(all=True, size=True, filters={"id": container_id}))
    if not found:
        raise EngineNotFound(f"sandbox {container_id[:12]} is gone")
    return int(found[0].get("SizeRw") or 0)


def watch(container_id: str, limit: int, *, poll: float = POLL_S) -> None:
    """Watch the container's writable layer against `limit` bytes until `stop` (or its end)."""
    done = threading.Event()
    with _lock:
        _watchers[container_id] = done
    threading.Thread(target=_run, args=(container_id, limit, poll, done), daemon=True,
                     name=f"diskwatch-{container_id[:12]}").start()


def stop(container_id: str) -> None:
    with _lock:
        done = _watchers.pop(container_id, None)
    if done is not None:
        done.set()


def _run(container_id: str, limit: int, poll: float, done: threading.Event) -> None:
    while not done.wait(poll):
        try:
            size = layer_size(container_id)
        except EngineNotFound:
            return
        except InfraError as exc:  # a busy engine: the next poll asks again
            log.info("the size of sandbox %s's writable layer is unknown for now: %s", container_id[:12], exc)
            continue
        if size > limit:
            log.info("sandbox %s wrote %d bytes outside its tmpfs places, beyond --disk's %d: killed",
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
