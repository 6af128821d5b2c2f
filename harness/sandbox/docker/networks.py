"""Network policy per sandbox: none (default), internet, or internal:NAME.

Docker publishes no ports on `internal` networks, and the harness must reach each
sandbox's service through a published port, so "none" is a harness-owned bridge
with IP masquerading off (no route out: nothing is NATed to the world) and
inter-container traffic off (sandboxes cannot see each other). The published
port is bound to 127.0.0.1, so the sandbox cannot reach it back through the
gateway either. What stays reachable from inside: services on the host that
listen on all addresses (0.0.0.0) via the bridge gateway; bind host services to
127.0.0.1 if that matters.

"internal:NAME" adds the existing internal network NAME (e.g. an offline website
for browsing tasks) to a "none" sandbox.
"""

from __future__ import annotations

import threading

import docker.errors
from filelock import FileLock

from harness.errors import InputError
from harness.sandbox.docker import engine
from harness.settings import state_dir

ISOLATED = "harness-isolated"
ISOLATED_OPTIONS = {
    "com.docker.network.bridge.enable_ip_masquerade": "false",
    "com.docker.network.bridge.enable_icc": "false",
}
_ready: set[str] = set()
_lock = threading.Lock()


def ensure_isolated() -> str:
    with _lock:
        if ISOLATED in _ready:
            return ISOLATED
        api = engine.client().api
        with FileLock(str(state_dir() / "networks.lock"), timeout=60):
            if not engine.call("network list", lambda: api.networks(names=[ISOLATED])):
                engine.call("network create", lambda: api.create_network(
                    ISOLATED, driver="bridge", options=ISOLATED_OPTIONS, check_duplicate=True,
                    labels={"harness.managed": "1"}))
        _ready.add(ISOLATED)
        return ISOLATED


def check_policy(policy: str) -> None:
    """Preflight: an internal:NAME network must already exist."""
    if policy.startswith("internal:"):
        name = policy.split(":", 1)[1]
        rows = engine.call("network list", lambda: engine.client().api.networks(names=[name]))
        found = [n for n in rows if n["Name"] == name]
        if not found:
            raise InputError(f"network policy {policy}: no Docker network named {name!r}")


def create_options(policy: str) -> dict:
    if policy == "internet":
        return {"network": "bridge"}
    return {"network": ensure_isolated()}


def extra_networks(policy: str) -> list[str]:
    return [policy.split(":", 1)[1]] if policy.startswith("internal:") else []


def connect(container_id: str, policy: str) -> None:
    for name in extra_networks(policy):
        try:
            engine.call("network connect", lambda: engine.client().api.connect_container_to_network(container_id, name))
        except docker.errors.NotFound as exc:
            raise InputError(f"network policy {policy}: no Docker network named {name!r}") from exc
