"""A sandbox's task: where it runs, whether it still does.

Swarm's scheduler places the task and node states (drain, down) decide health; the harness
only watches its own tasks. With one replica and restart condition none a service has one
task, and once that task leaves `running` it never comes back: a task that failed, was
rejected (e.g. "No such image" on its node), completed, shut down or was orphaned, or whose
node is down or drained, is the end of the sandbox (SandboxDied: infra, retried by the runner
on a fresh service).
"""

from __future__ import annotations

import time

from harness.errors import EngineNotFound, InfraError, SandboxDied, SandboxExhausted
from harness.sandbox.docker import engine, ports
from harness.sandbox.swarm import cluster

# Task states in swarmkit's order; everything from `complete` on is final.
ORDER = ["new", "allocated", "pending", "assigned", "accepted", "preparing", "ready", "starting", "running",
         "complete", "shutdown", "failed", "rejected", "remove", "orphaned"]
FINAL = set(ORDER[ORDER.index("complete"):])


def service_tasks(service_id: str) -> list[dict]:
    """The service's tasks; [] when the service is gone."""
    try:
        return engine.call("task list", lambda: cluster.api().tasks(filters={"service": service_id}))
    except EngineNotFound:
        return []


def current(service_id: str) -> dict | None:
    """The service's newest task, or None (no task yet, or the service is gone)."""
    found = service_tasks(service_id)
    return max(found, key=lambda t: (t.get("Version", {}).get("Index", 0))) if found else None


def state(task: dict) -> str:
    return task.get("Status", {}).get("State", "")


def published_port(task: dict) -> int | None:
    for port in task.get("Status", {}).get("PortStatus", {}).get("Ports") or []:
        if port.get("TargetPort") == ports.SERVICE_PORT and port.get("PublishedPort"):
            return int(port["PublishedPort"])
    return None


def describe(task: dict) -> str:
    status = task.get("Status", {})
    node = cluster.node(task["NodeID"]) if task.get("NodeID") else None
    where = f" on node {cluster.node_name(node)}" if node else ""
    reason = status.get("Err") or status.get("Message") or ""
    code = (status.get("ContainerStatus") or {}).get("ExitCode")
    return f"task {state(task)}{where}: {reason}" + (f" (exit code {code})" if code else "")


def _exists(service_id: str) -> bool:
    try:
        engine.call("service inspect", lambda: cluster.api().inspect_service(service_id))
        return True
    except EngineNotFound:
        return False


def _oom_killed(task: dict) -> bool:
    """Whether the kernel killed the task's container for memory. Swarm's task status does not
    say; the container's state does, when it is on the engine the harness talks to."""
    container = (task.get("Status", {}).get("ContainerStatus") or {}).get("ContainerID")
    if not container or (task.get("Status", {}).get("ContainerStatus") or {}).get("ExitCode") != 137:
        return False
    return bool(engine.container_state(container).get("OOMKilled"))


def raise_if_dead(service_id: str, name: str, cause: BaseException | None = None, *, agent_ran: bool = True) -> None:
    """SandboxDied when the service is gone, its task left `running`, or its node is down or
    drained; SandboxExhausted when the kernel killed it for memory after agent code ran."""
    task = current(service_id)
    if task is None:
        if not _exists(service_id):
            raise SandboxDied(f"sandbox {name} no longer exists") from cause
        return  # not scheduled yet
    if task.get("DesiredState") in FINAL or state(task) in FINAL:
        if _oom_killed(task) and agent_ran:
            raise SandboxExhausted(f"sandbox {name} died: {describe(task)} (killed: out of memory, used up by the "
                                   f"agent's code)") from cause
        raise SandboxDied(f"sandbox {name} died: {describe(task)}") from cause
    if task.get("NodeID"):
        node = cluster.node(task["NodeID"])
        if node is None or not cluster.usable(node):
            what = "left the swarm" if node is None else (
                f"is {node.get('Status', {}).get('State')}/{node.get('Spec', {}).get('Availability')}")
            where = cluster.node_name(node) if node else task['NodeID'][:12]
            raise SandboxDied(f"sandbox {name} died: its node {where} {what}") from cause


def wait_running(service_id: str, name: str, timeout: float) -> tuple[str, int]:
    """Wait for the task to run; return (node id, published port). A task that ends first
    (rejected on its node: no such image, no such network...) is an InfraError naming the node
    and the reason; so is a task not running after `timeout` s (waiting for resources counts)."""
    deadline = time.monotonic() + timeout
    delay, task, node_checked = 0.02, None, time.monotonic()
    while True:
        task = current(service_id)
        if task is not None:
            if task.get("NodeID") and state(task) != "running" and time.monotonic() - node_checked > 1:
                # Assigned to a node that went down or was drained: it would wait for that node forever.
                node_checked = time.monotonic()
                node = cluster.node(task["NodeID"])
                if node is None or not cluster.usable(node):
                    what = "left the swarm" if node is None else (
                        f"is {node.get('Status', {}).get('State')}/{node.get('Spec', {}).get('Availability')}")
                    raise InfraError(f"sandbox {name} did not start: {describe(task)}; its node {what}")
            if state(task) == "running":
                port = published_port(task)
                if port is None:
                    raise InfraError(f"sandbox {name}: {describe(task)}; no published port for "
                                     f"{ports.SERVICE_PORT}/tcp (is the network a bridge network?)")
                return task["NodeID"], port
            if state(task) in FINAL or task.get("DesiredState") in FINAL:
                raise InfraError(f"sandbox {name} did not start: {describe(task)}")
        if time.monotonic() > deadline:
            where = describe(task) if task else "no task scheduled"
            raise InfraError(f"sandbox {name} not running after {timeout:.0f}s ({where})")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)
