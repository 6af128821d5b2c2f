"""Host ports for sandbox services, allocated without races.

Default: Docker assigns the host port (publish with no host port, read it back),
which is atomic inside the engine; zero collisions however many processes start
sandboxes at once. Bound to 127.0.0.1 for a local engine (see bind_address).

Optional: HARNESS_PORT_RANGE=LOW-HIGH (remote hosts behind a firewall that opens
only a range). Choosing a port and starting the container then happen under one
file lock shared by every harness process on this machine; ports held by any
container on the engine are skipped, and a port that still turns out taken at
start is skipped too. Processes on *other* machines using the same remote engine
are not covered by the lock; the start-time check and retry cover them.
"""

from __future__ import annotations

import os
import socket
from contextlib import contextmanager
from typing import Iterator

from filelock import FileLock

from harness.errors import InputError
from harness.state import state_dir

SERVICE_PORT = 8765  # sandboxd's port inside the container


def bind_address() -> str:
    """127.0.0.1 for a local engine; all addresses for a remote one, whose ports we must reach
    over the network (every request still needs the sandbox's token). HARNESS_PORT_BIND overrides."""
    from harness.sandbox.docker.engine import engine_is_local

    return os.environ.get("HARNESS_PORT_BIND") or ("127.0.0.1" if engine_is_local() else "0.0.0.0")
# How long a process may wait for the range lock: one create+start is ~0.3 s, so
# 120 s means a queue of hundreds of starts; beyond that something is stuck.
LOCK_TIMEOUT_S = float(os.environ.get("HARNESS_PORT_LOCK_TIMEOUT", 120))


def port_range() -> range | None:
    raw = os.environ.get("HARNESS_PORT_RANGE", "").strip()
    if not raw:
        return None
    try:
        low, high = (int(x) for x in raw.split("-"))
    except ValueError:
        raise InputError(f"HARNESS_PORT_RANGE={raw!r}: expected LOW-HIGH, e.g. 20000-20999") from None
    if not 1 <= low <= high <= 65535:
        raise InputError(f"HARNESS_PORT_RANGE={raw!r}: need 1 <= LOW <= HIGH <= 65535")
    return range(low, high + 1)


def publish(host_port: int | None) -> dict:
    """The `ports=` argument for a container create."""
    return {f"{SERVICE_PORT}/tcp": (bind_address(), host_port)}


def read_port(attrs: dict) -> int:
    bindings = (attrs.get("NetworkSettings", {}).get("Ports") or {}).get(f"{SERVICE_PORT}/tcp") or []
    for binding in bindings:
        if binding.get("HostPort"):
            return int(binding["HostPort"])
    raise KeyError("no published port")


def ports_in_use(api) -> set[int]:
    used = set()
    for container in api.containers(all=True):
        for port in container.get("Ports") or []:
            if port.get("PublicPort"):
                used.add(int(port["PublicPort"]))
    return used


def free_locally(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            bind = bind_address()
            sock.bind((bind if bind != "0.0.0.0" else "", port))
            return True
        except OSError:
            return False


@contextmanager
def range_lock() -> Iterator[None]:
    with FileLock(str(state_dir() / "ports.lock"), timeout=LOCK_TIMEOUT_S):
        yield


def is_port_taken_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "port is already allocated" in text or "address already in use" in text
