"""Find and remove harness services across the whole swarm (services live on the managers).

The rules of docker/cleanup.py, applied to services: only services labelled
harness.managed=1 are ever listed; an orphan is one whose owner process (label
harness.owner, "host:pid:starttime") is gone from this host (`naming.owner_alive`); owners
on other hosts are never orphans; --run-id and --all select by label. Removing a service
makes each node stop and remove its container (asynchronously: `containers_left` on a node's
engine tells when they are gone). The shared networks carry no owner and are kept.
"""

from __future__ import annotations

import time

from harness.errors import EngineNotFound, InfraError
from harness.sandbox.contract import Leftover
from harness.sandbox.docker import cleanup as docker_cleanup
from harness.sandbox.docker import engine, naming
from harness.sandbox.swarm import cluster, tasks, volumes


def find(run_id: str | None = None) -> list[Leftover]:
    cluster.require_manager()  # InputError, not an engine error, when there is no swarm to ask
    filters = [f"{naming.LABEL_MANAGED}=1"] + ([f"{naming.LABEL_RUN}={run_id}"] if run_id else [])
    rows = engine.call("service list", lambda: cluster.api().services(filters={"label": filters}))
    found = []
    for row in rows:
        labels = row.get("Spec", {}).get("Labels") or {}
        try:
            task = tasks.current(row["ID"])
        except EngineNotFound:
            task = None
        found.append(Leftover(row["ID"], labels.get(naming.LABEL_NAME) or row["Spec"].get("Name", "?"),
                              labels.get(naming.LABEL_RUN, ""), labels.get(naming.LABEL_OWNER, ""),
                              f"service/{tasks.state(task) if task else 'unscheduled'}"))
    return found


def remove(service_id: str) -> None:
    """Remove a service; already gone is fine."""
    try:
        engine.call("service remove", lambda: cluster.api().remove_service(service_id))
    except EngineNotFound:
        pass


STOP_WAIT = 30.0  # seconds a teardown waits for another node to stop a sandbox's container


def retire(service_id: str) -> None:
    """Remove the sandbox's service and stop its container: after this, its sandboxd answers no
    more (so a stale handle gets SandboxDied at once). The service always goes first, while its task
    still runs: a service removed after its task had ended (its container killed first, or the service
    scaled to 0 and its task shut down) lets the manager's task reaper delete that task while the
    orchestrator marks it for removal, a race that crashed the manager's engine once in a fresh-clone
    suite run (a nil task in swarmkit's SetServiceTasksRemove, Debian's docker.io 20.10.24). Removing
    the service alone would leave the container answering for ~3 s here, until its node's agent acts
    on it: on the engine the harness talks to, the container is then removed directly (~0.3 s, its
    volumes too); on another node the task is watched until it shut down or is gone (bounded by
    STOP_WAIT; not at all when the node is down). Idempotent: a gone service is fine."""
    task = tasks.current(service_id)
    remove(service_id)
    if task is None or tasks.state(task) in tasks.FINAL:
        return
    container = (task.get("Status", {}).get("ContainerStatus") or {}).get("ContainerID")
    node_id = task.get("NodeID", "")
    if container and node_id == volumes.local_node_id():
        engine.remove_container(container)
    elif node_id and (found := cluster.node(node_id)) is not None and cluster.usable(found):
        _wait_stopped(task["ID"])


def _wait_stopped(task_id: str) -> None:
    api = cluster.api()
    deadline = time.monotonic() + STOP_WAIT
    while time.monotonic() < deadline:
        try:
            found = engine.call("task list", lambda: api.tasks(filters={"id": task_id}))
        except InfraError:
            return  # the manager cannot say: removing the service was all that could be done
        if not found or all(tasks.state(t) in tasks.FINAL for t in found):
            return
        time.sleep(0.1)


def reap(*, run_id: str | None = None, everything: bool = False, dry_run: bool = False) -> list[Leftover]:
    doomed = docker_cleanup.select(find(run_id), run_id=run_id, everything=everything)
    if not dry_run:
        for item in doomed:
            retire(item.id)
        # Unused volumes of the manager's node whose sandbox is gone (volumes.py): those of the
        # run, or of owners that are gone (a live owner's may be just taken into use).
        live = {item.name for item in find(run_id)}
        filters = [f"{naming.LABEL_RUN}={run_id}"] if run_id else []
        for row in _dangling(filters):
            labels = row.get("Labels") or {}
            if labels.get(naming.LABEL_NAME) in live:
                continue
            if run_id or everything or naming.owner_alive(labels.get(naming.LABEL_OWNER, "")) is False:
                volumes.remove_volume(row["Name"])
    return doomed


def _dangling(label_filters: list[str]) -> list[dict]:
    api = engine.client().api
    return engine.call("volume list", lambda: api.volumes(
        filters={"dangling": True, "label": [f"{naming.LABEL_MANAGED}=1", *label_filters]})).get("Volumes") or []


def containers_left(api, run_id: str) -> list[str]:
    """Containers of a run still on one node's engine (`api`: that node's APIClient)."""
    rows = api.containers(all=True, filters={"label": [f"{naming.LABEL_MANAGED}=1", f"{naming.LABEL_RUN}={run_id}"]})
    return [row["Id"] for row in rows]
