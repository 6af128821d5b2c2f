"""Host ports for sandbox services, allocated without races.

Default: Docker assigns the host port (publish with no host port, read it back),
which is atomic inside the engine; zero collisions however many processes start
sandboxes at once. Bound to 127.0.0.1 for a local engine (see bind_address).

Optional: HARNESS_PORT_RANGE=LOW-HIGH (remote hosts behind a firewall that opens
only a range). Choosing a port and starting the container then happen under one
file lock shared by every harness process on this machine; ports held by any
container on the engine are skipped, and a port that still turns out taken at
start (PortTaken, raised by engine.py) is skipped too. Processes on *other* machines
using the same remote engine are not covered by the lock; the start-time check and
retry cover them.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from filelock import FileLock

from harness.settings import settings, state_dir

SERVICE_PORT = 8765  # sandboxd's port inside the container


def bind_address() -> str:
    """127.0.0.1 for a local engine; all addresses for a remote one, whose ports we must reach
    over the network (every request still needs the sandbox's token). HARNESS_PORT_BIND overrides."""
    from harness.sandbox.docker.engine import engine_is_local

    return settings().port_bind or ("127.0.0.1" if engine_is_local() else "0.0.0.0")


def port_range() -> range | None:
    """HARNESS_PORT_RANGE as a range (validated with the other settings), or None."""
    return settings().ports()


def publish(host_port: int | None) -> dict:
    """The `ports=` argument for a container create."""
    return {f"{SERVICE_PORT}/tcp": (bind_address(), host_port)}


def read_port(attrs: dict) -> int:
    bindings = (attrs.get("NetworkSettings", {}).get("Ports") or {}).get(f"{SERVICE_PORT}/tcp") or []
    for binding in bindings:
        if binding.get("HostPort"):
            return int(binding["HostPort"])
    raise KeyError("no published port")


def ports_in_use() -> set[int]:
    from harness.sandbox.docker import engine

    used = set()
    for container in engine.call("list", lambda: engine.client().api.containers(all=True)):
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
    # port_lock_timeout: one create+start is ~0.3 s, so 120 s is a queue of hundreds of starts.
    with FileLock(str(state_dir() / "ports.lock"), timeout=settings().port_lock_timeout):
        yield
