"""A SandboxSpec as a swarm service: the `create_service` arguments.

What the docker provider sets and a service cannot (API 1.41, dockerd 20.10), and what is done
instead:

- no `no-new-privileges` (not in the service API of dockerd 20.10, API 1.41): the image
  runs sandboxd as the unprivileged `agent` with every capability dropped (cap_drop ALL), so
  setuid binaries cannot gain capabilities either;
- no storage quota (`storage_opt` is not in a ContainerSpec): always the tmpfs backend of
  docker/storage.py (read-only root; /workspace, /tmp, /home/agent size-limited tmpfs adding up to
  `disk`, memory limit `memory + disk`), as tmpfs volumes (volumes.py, and the volumes swarm
  leaves behind);
- no memory-swap limit: swap is whatever the node's engine allows (none on nodes without swap);
- the published port cannot be bound to 127.0.0.1 (host mode listens on all of the node's
  addresses; every request still needs the sandbox's token).

Reservations are `cpus` and `memory` (the memory limit adds `disk`, see above): the scheduler
places a sandbox only where they fit, and a task that fits nowhere yet waits (`pending`) within
HARNESS_SWARM_TASK_TIMEOUT (a 2-CPU node runs two sandboxes of --cpus 1 at a time). The log is
json-file, capped as docker/storage.py caps it.
The pids limit goes in as `Resources.Limits.Pids` (API 1.41; the SDK has no argument for it).
Containers stop with SIGKILL: sandboxd as PID 1 would otherwise sit out the 10 s grace period.
"""

from __future__ import annotations

import docker.types

from harness.sandbox.contract import SandboxSpec, parse_size
from harness.sandbox.docker import naming, ports, storage
from harness.sandbox.swarm import networks, volumes


def labels(spec: SandboxSpec, name: str) -> dict[str, str]:
    return {**naming.labels(spec.run_id, spec.instance_id, spec.attempt), naming.LABEL_NAME: name}


def resources(spec: SandboxSpec) -> dict:
    memory = parse_size(spec.memory) + parse_size(spec.disk)  # tmpfs pages count as memory
    nano = int(spec.cpus * 1e9)
    made = dict(docker.types.Resources(cpu_limit=nano, mem_limit=memory, cpu_reservation=nano,
                                       mem_reservation=parse_size(spec.memory)))
    made["Limits"]["Pids"] = spec.pids
    return made


def service_kwargs(spec: SandboxSpec, name: str, token: str) -> dict:
    """Keyword arguments of `APIClient.create_service` for this sandbox."""
    tagged = labels(spec, name)
    container = docker.types.ContainerSpec(
        image=spec.image,
        env={**spec.env, "HARNESS_SANDBOX_TOKEN": token},
        labels=tagged,
        mounts=volumes.tmpfs_mounts(spec.image, parse_size(spec.disk), tagged),
        read_only=True,
        cap_drop=["ALL"],
        user=spec.user,
        stop_signal="SIGKILL",
        dns_config=docker.types.DNSConfig(options=networks.dns_options(spec.network)) if
        networks.dns_options(spec.network) else None,
    )
    log = storage.LOG_CONFIG
    template = docker.types.TaskTemplate(
        container_spec=container,
        resources=resources(spec),
        restart_policy=docker.types.RestartPolicy(condition="none"),
        log_driver=docker.types.DriverConfig(log["type"], log["config"]),
        networks=[{"Target": net} for net in networks.service_networks(spec.network)],
    )
    return dict(
        task_template=template,
        name=name,
        labels=tagged,
        mode=docker.types.ServiceMode("replicated", replicas=1),
        # No published port given: the node's engine picks a free one (read from the task's status).
        endpoint_spec={"Mode": "vip", "Ports": [{"Protocol": "tcp", "TargetPort": ports.SERVICE_PORT,
                                                  "PublishMode": "host"}]},
    )
