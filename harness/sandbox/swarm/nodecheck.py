"""Preflight on every node: the sandbox image and the isolated network are there.

Without a registry each node needs the image locally (the user builds or loads it on each
node: `docker save IMAGE | docker -H NODE load`) and the config-only network of
networks.py. One short global job checks both before any instance starts: a task of the
image, on the sandboxes' network, running `true` on every usable (ready, active) node. A node
whose task is rejected or fails ("No such image", "network ... not found") is named with its
reason, all such nodes in one InputError (a node not set up is the user's to fix, as a task's missing base
image is: exit 2 before any instance); a node that does not answer in time is an InfraError. The same check
runs for each image a benchmark or task names (`SwarmProvider.image_of`: the gaia2 image, a Harbor task's).
Measured here (bench/swarm.py): ~0.9 s, on one node as on two.
"""

from __future__ import annotations

import secrets
import time

import docker.types

from harness.errors import InfraError, InputError
from harness.sandbox.docker import engine, naming
from harness.sandbox.swarm import cleanup, cluster, networks, tasks, volumes

RUN_ID = "swarm-preflight"


def check_nodes(image: str, policy: str, timeout: float) -> float:
    """Run the check; return its duration in seconds. InputError naming each node that cannot run `image`."""
    t0 = time.monotonic()
    usable = {node["ID"]: node for node in cluster.nodes() if cluster.usable(node)}
    if not usable:
        raise InfraError("the swarm has no ready, active node to run sandboxes on")
    name = f"harness-check-{secrets.token_hex(4)}"
    tagged = {**naming.labels(RUN_ID, "image-check", 1), naming.LABEL_NAME: name}
    template = docker.types.TaskTemplate(
        container_spec=docker.types.ContainerSpec(image=image, command=["true"], labels=tagged, cap_drop=["ALL"],
                                                  read_only=True, stop_signal="SIGKILL"),
        restart_policy=docker.types.RestartPolicy(condition="none"),
        networks=[{"Target": net} for net in networks.service_networks(policy)],
    )
    api = cluster.api()
    service = engine.call("service create", lambda: api.create_service(
        template, name=name, labels=tagged, mode={"GlobalJob": {}}), retries=0)["ID"]
    try:
        done: dict[str, dict] = {}
        while True:
            for task in tasks.service_tasks(service):
                if task.get("NodeID") in usable and tasks.state(task) in tasks.FINAL:
                    done[task["NodeID"]] = task
            if set(done) >= set(usable):
                break
            if time.monotonic() - t0 > timeout:
                missing = [cluster.node_name(usable[n]) for n in usable if n not in done]
                raise InfraError(f"swarm preflight: no answer from node(s) {', '.join(missing)} after {timeout:.0f}s "
                                 f"(running {image} there)")
            time.sleep(0.05)
        bad = [f"{cluster.node_name(usable[node_id])}: {tasks.describe(task)}"
               for node_id, task in done.items() if tasks.state(task) != "complete"]
        if bad:
            raise InputError(f"swarm preflight: {len(bad)} of {len(usable)} node(s) cannot run sandboxes of {image} "
                             f"(each node needs the image, e.g. docker save {image} | docker -H NODE load, and the "
                             f"network config {networks.CONFIG}):\n  " + "\n  ".join(bad))
    finally:
        # The node removes a removed service's containers a few seconds later; on our own node
        # remove them now (a swarm left meanwhile would leave them behind).
        for task in tasks.service_tasks(service):
            container = (task.get("Status", {}).get("ContainerStatus") or {}).get("ContainerID")
            if container and task.get("NodeID") == volumes.local_node_id():
                engine.remove_container(container)
        cleanup.remove(service)
    return time.monotonic() - t0
