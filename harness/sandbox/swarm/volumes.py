"""The writable places of a sandbox, and the volumes swarm leaves behind.

A service's own tmpfs mounts take no options on API 1.41 (always noexec, owned by root, and
the mode is dropped when a size is given: measured), so agent code could not run what it
writes. Instead each writable place is an anonymous `local` volume of type tmpfs with the
docker provider's options (size, exec, owner `agent`; a task's own image: its own places, open to
any user: docker/storage.py), made on the task's node and removed with its container.

Trap (dockerd 20.10): the swarm executor creates each such volume once while preparing the
task, and the container create makes another: the executor's copies are never mounted and
never removed. They carry the sandbox's labels and hold no data (tmpfs). The harness removes
them on the engine it talks to (the manager's own node) once the task runs, and `cleanup`
removes any left there; on other nodes they stay until `docker volume prune --filter
label=harness.managed=1` is run against that node.
"""

from __future__ import annotations

import threading

import docker.types

from harness.errors import InfraError
from harness.sandbox.docker import engine, naming, storage
from harness.sandbox.swarm import cluster

_lock = threading.Lock()
_local: list[str] = []


def tmpfs_mounts(image: str, disk: int, tagged: dict[str, str]) -> list[docker.types.Mount]:
    """The docker provider's tmpfs places for `image` (a task's own image has its own: storage.tmpfs_places)."""
    return [docker.types.Mount(target, None, type="volume", labels=tagged, driver_config=docker.types.DriverConfig(
                "local", {"type": "tmpfs", "device": "tmpfs", "o": f"size={size},exec,nosuid,nodev,{mode}"}))
            for target, (size, mode) in storage.tmpfs_places(image, disk).items()]


def local_node_id() -> str:
    """The swarm node id of the engine the harness talks to."""
    with _lock:
        if not _local:
            _local.append(cluster.require_manager().get("NodeID", ""))
        return _local[0]


def remove_dangling(*label_filters: str) -> list[str]:
    """Remove unused harness volumes matching the label filters on the engine the harness talks to."""
    api = engine.client().api
    rows = engine.call("volume list", lambda: api.volumes(
        filters={"dangling": True, "label": [f"{naming.LABEL_MANAGED}=1", *label_filters]})).get("Volumes") or []
    return [row["Name"] for row in rows if remove_volume(row["Name"])]


def remove_volume(name: str) -> bool:
    try:
        engine.call("volume remove", lambda: engine.client().api.remove_volume(name), retries=0)
        return True
    except InfraError:  # gone (EngineNotFound), or just taken into use: leave it
        return False


def after_start(node_id: str, name: str) -> None:
    """Drop the executor's unused copies of a sandbox's volumes when it runs on our own node."""
    if node_id == local_node_id():
        remove_dangling(f"{naming.LABEL_NAME}={name}")
