"""The swarm as the harness sees it: the manager it talks to, its nodes and their addresses.

Every call goes through the docker provider's `engine.call` (one client, its timeouts and
retries). A node is usable when it is `ready` and `active` (not drained, not paused): the
scheduler places tasks only there, and preflight checks the image on each of them.
"""

from __future__ import annotations

import threading

from harness.errors import EngineNotFound, InfraError, InputError
from harness.sandbox.contract import Capacity
from harness.sandbox.docker import engine

_lock = threading.Lock()
_addrs: dict[str, str] = {}


def api():
    return engine.client().api


def require_manager() -> dict:
    """The engine's swarm info; InputError when it is no swarm manager (nothing to schedule on)."""
    info = engine.call("info", lambda: api().info())
    swarm = info.get("Swarm") or {}
    if swarm.get("LocalNodeState") != "active":
        raise InputError("--sandbox swarm: the Docker engine is not part of a swarm (state "
                         f"{swarm.get('LocalNodeState') or 'inactive'}); run `docker swarm init` or point "
                         "DOCKER_HOST at a swarm manager")
    if not swarm.get("ControlAvailable"):
        raise InputError("--sandbox swarm: the Docker engine is a swarm worker; services are made on a manager: "
                         "point DOCKER_HOST at one")
    return swarm


def nodes() -> list[dict]:
    return engine.call("node list", lambda: api().nodes())


def usable(node: dict) -> bool:
    return (node.get("Status", {}).get("State") == "ready"
            and node.get("Spec", {}).get("Availability") == "active")


def node_name(node: dict) -> str:
    return node.get("Description", {}).get("Hostname") or node["ID"][:12]


def node(node_id: str) -> dict | None:
    """The node as the manager sees it now, or None when it left the swarm."""
    try:
        return engine.call("node inspect", lambda: api().inspect_node(node_id))
    except EngineNotFound:
        return None


def node_addr(node_id: str) -> str:
    """The address at which a node's host-mode ports answer: its `Status.Addr` (cached: a
    node keeps its address while it is in the swarm). A manager listening on all addresses
    may report 0.0.0.0; its manager address is used then."""
    with _lock:
        if node_id in _addrs:
            return _addrs[node_id]
    found = node(node_id)
    if found is None:
        raise InfraError(f"swarm node {node_id[:12]} left the swarm")
    addr = found.get("Status", {}).get("Addr") or ""
    if addr in ("", "0.0.0.0"):
        addr = (found.get("ManagerStatus", {}).get("Addr") or "").rsplit(":", 1)[0]
    if not addr:
        raise InfraError(f"swarm node {node_name(found)} reports no address")
    with _lock:
        _addrs[node_id] = addr
    return addr


def capacity() -> Capacity:
    """The largest usable node: what one sandbox could be given (reservations are per node)."""
    best = Capacity(cpus=0.0, memory=0)
    for item in nodes():
        if not usable(item):
            continue
        res = item.get("Description", {}).get("Resources", {})
        cpus, memory = (res.get("NanoCPUs") or 0) / 1e9, int(res.get("MemoryBytes") or 0)
        if (cpus, memory) > (best.cpus, best.memory):
            best = Capacity(cpus=cpus, memory=memory)
    return best
