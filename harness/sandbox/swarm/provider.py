"""Swarm sandboxes: one single-replica service per sandbox, placed by the swarm's scheduler.

`SwarmProvider` talks to one swarm manager (DOCKER_HOST, or the local socket) through the
docker provider's engine module. Each sandbox is a service (mode replicated, replicas=1,
restart condition none) whose task runs the sandbox image with sandboxd as PID 1; sandboxd's
port 8765 is published in host mode on a port the node's engine picks, and the sandbox's
address is its node's `Status.Addr` with the task's `PublishedPort`. Commands and files go
through sandboxd, never through bind mounts or `docker exec` (which would need each node's
engine). Labels (naming.labels + harness.name) are on the service and on its containers.

Health: the scheduler and node states decide; the harness watches only its own task
(tasks.py): a task that leaves `running`, or a node that goes down or is drained, ends the
sandbox as SandboxDied (infra: the runner retries the instance on a fresh service). A start
waits for the task to run (HARNESS_SWARM_TASK_TIMEOUT), then for sandboxd (as docker does).

What swarm cannot do that the docker provider does is listed in spec.py (no-new-privileges,
storage quota, swap limit, loopback-only port) and networks.py (network policies). Not
supported: HARNESS_PORT_RANGE and `--website` (an InputError at preflight / before any
instance). Images: each node needs the sandbox image locally (no registry here); `preflight`
builds it on the manager and checks every usable node (nodecheck.py) before any instance. A
benchmark's or task's own image (`Instance.image`: gaia2, a Harbor task's) is built on the manager
by the docker provider's code (task_images.py) and checked on every node the same way.
"""

from __future__ import annotations

import secrets

from harness.errors import InputError
from harness.sandbox.contract import (
    WORKSPACE,
    Capabilities,
    Capacity,
    ImageInfo,
    Leftover,
    Sandbox,
    SandboxHandle,
    SandboxProvider,
    SandboxSpec,
)
from harness.sandbox.docker import engine, images, naming, storage, task_images
from harness.sandbox.service import ServiceSandbox
from harness.sandbox.swarm import cleanup, cluster, networks, nodecheck, tasks, volumes
from harness.sandbox.swarm import spec as service_spec
from harness.settings import settings

NAME = "swarm"


class SwarmSandbox(ServiceSandbox):
    provider = NAME

    def __init__(self, spec: SandboxSpec, service_id: str, name: str, host: str, port: int, token: str,
                 node_id: str = "", workdir: str = WORKSPACE):
        super().__init__(spec, name, host, port, token, workdir=workdir)
        self.id, self.node_id = service_id, node_id

    def ref(self) -> dict:
        return {"service_id": self.id, "node_id": self.node_id}

    def raise_if_dead(self, cause: BaseException) -> None:
        tasks.raise_if_dead(self.id, self.name, cause)


def _remove_by_name(name: str) -> None:
    """After a create that failed on our side: it may still have made the service."""
    try:
        rows = engine.call("service list", lambda: cluster.api().services(
            filters={"label": f"{naming.LABEL_NAME}={name}"}))
        for row in rows:
            cleanup.remove(row["ID"])
    except Exception:  # noqa: BLE001 - best effort; the orphan reaper is the backstop
        pass


class SwarmProvider(SandboxProvider):
    name = NAME
    # No website: a site's network is local to one engine (give --network internal:NAME with a
    # swarm-scoped network instead); no web proxy.
    capabilities = Capabilities(images=True)
    # attach(): every agent process speaks to sandboxd through the service client and its HTTP library (imported
    # lazily there, so a run that starts no sandbox never loads it; a forked agent importing it paid ~18 ms)
    preload = ("harness.sandbox.service", "urllib3")
    _network = "none"  # the run's network policy, set by preflight

    def image_ref(self) -> str:
        return images.sandbox_tag()  # the one preflight builds on the manager

    def preflight(self, *, network: str = "none", log=print) -> str:
        """The engine is a manager, the policy is possible, the image is on every usable node."""
        cluster.require_manager()
        if settings().port_range:
            raise InputError("HARNESS_PORT_RANGE is not supported by the swarm provider (each node's engine picks "
                             "the published port); unset it")
        networks.check_policy(network)
        self._network = network  # image_of checks a named image on the network the sandboxes get
        image = images.build(log=log)  # on the manager; other nodes must have it (nodecheck)
        spent = nodecheck.check_nodes(image, network, settings().swarm_task_timeout)
        log(f"swarm: {image} runs on every usable node (checked in {spent:.1f}s)")
        if network != "internet":
            problem = networks.apply_firewall()
            if problem:
                log(f"warning: network 'none' on swarm is not sealed against the host: no firewall rules for "
                    f"bridge {networks.BRIDGE} ({problem}); sandboxes can reach services of their node listening "
                    f"on all addresses via the gateway")
        return image

    def check_image(self, name: str) -> None:
        task_images.check_image(name)  # on the manager, as the docker provider does

    def image_of(self, name: str, *, log=print, build_timeout: float | None = None) -> str:
        """Built on the manager as the docker provider builds it; every usable node must have it (nodecheck)."""
        image = task_images.image_of(name, log=log, build_timeout=build_timeout)
        spent = nodecheck.check_nodes(image, self._network, settings().swarm_task_timeout)
        log(f"swarm: {image} runs on every usable node (checked in {spent:.1f}s)")
        return image

    def capacity(self) -> Capacity:
        return cluster.capacity()

    def start(self, spec: SandboxSpec) -> SwarmSandbox:
        name = naming.container_name(spec.run_id, spec.instance_id, spec.attempt)
        token = secrets.token_urlsafe(24)
        kwargs = service_spec.service_kwargs(spec, name, token)
        with engine.start_gate():
            try:
                # No retry: a create that timed out on our side may still have made the service.
                service_id = engine.call("service create", lambda: cluster.api().create_service(**kwargs),
                                         retries=0)["ID"]
            except BaseException:
                _remove_by_name(name)
                raise
        try:
            node_id, port = tasks.wait_running(service_id, name, settings().swarm_task_timeout)
            sandbox = SwarmSandbox(spec, service_id, name, cluster.node_addr(node_id), port, token, node_id,
                                   spec.workdir or storage.workdir(spec.image))
            volumes.after_start(node_id, name)
        except BaseException:
            cleanup.remove(service_id)
            raise
        try:
            sandbox._service.wait_ready(settings().sandbox_ready_timeout,
                                        lambda: tasks.raise_if_dead(service_id, name, agent_ran=False))
        except BaseException:
            self.teardown(sandbox)
            raise
        return sandbox

    def attach(self, handle: SandboxHandle) -> SwarmSandbox:
        if handle.provider != NAME:
            raise ValueError(f"a {handle.provider} handle cannot be attached by the swarm provider")
        return SwarmSandbox(handle.spec, handle.ref["service_id"], handle.name, handle.host, handle.port,
                            handle.token, handle.ref.get("node_id", ""), handle.workdir)

    def teardown(self, sandbox: Sandbox) -> None:
        assert isinstance(sandbox, SwarmSandbox)
        sandbox.close()
        cleanup.retire(sandbox.id)

    def find(self, run_id: str | None = None) -> list[Leftover]:
        return cleanup.find(run_id)

    def cleanup(self, *, run_id: str | None = None, everything: bool = False,
                dry_run: bool = False) -> list[Leftover]:
        return cleanup.reap(run_id=run_id, everything=everything, dry_run=dry_run)

    # Images: built on the manager's engine; every other node loads it (see nodecheck.py).
    def build_image(self, *, force: bool = False, log=print) -> str:
        return images.build(force=force, log=log)

    def list_images(self) -> list[ImageInfo]:
        return images.list_images()

    def prune_images(self, log=print) -> list[str]:
        return images.prune(log=log)
