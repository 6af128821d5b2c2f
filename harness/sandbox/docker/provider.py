"""Docker sandboxes: start one per instance, talk to its service, always remove it.

`DockerProvider` is the `SandboxProvider` for one Docker engine (DOCKER_HOST, or the
local socket). Each sandbox is a container whose PID 1 is sandboxd; commands and files
go through sandboxd, never through `docker exec`: on its Unix socket in a sandbox with no
network at all where the transport allows (policy `none` on a local Linux engine: sockets.py),
else on the one published port.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

from harness.errors import InfraError, InputError, MountSourceUnseen, PortTaken, UnknownUser
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
    parse_size,
)
from harness.sandbox.docker import (
    cleanup,
    diskwatch,
    engine,
    images,
    naming,
    networks,
    ports,
    sockets,
    storage,
    task_images,
    webproxy,
)
from harness.sandbox.docker.website import hosts_on as website_hosts
from harness.sandbox.service import ServiceSandbox
from harness.settings import settings

NAME = "docker"


class DockerSandbox(ServiceSandbox):
    provider = NAME

    def __init__(self, spec: SandboxSpec, container_id: str, name: str, host: str, port: int, token: str,
                 socket: str | None = None, workdir: str = WORKSPACE):
        super().__init__(spec, name, host, port, token, socket, workdir)
        self.id = container_id

    def ref(self) -> dict:
        return {"container_id": self.id}

    def raise_if_dead(self, cause: BaseException) -> None:
        engine.raise_if_dead(self.id, self.name, cause)


def _create_kwargs(spec: SandboxSpec, name: str, token: str, *, unix: bool = False) -> dict:
    """unix: the socket transport (sockets.py: no network, a mounted directory), else a network (the port
    is published by the caller)."""
    # No Docker name: the engine's embedded DNS would hand the name (and so the address) of
    # each sandbox to every other on the network (networks.py). The harness's name is a label.
    transport = sockets.mount_options(name) if unix else _network_options(spec.network)
    return dict(
        image=spec.image,
        labels={**naming.labels(spec.run_id, spec.instance_id, spec.attempt), naming.LABEL_NAME: name},
        # A run's web proxy (webproxy.py) adds its browser flags for the sandboxes of its network.
        environment={**webproxy.browser_env(spec.network.removeprefix("internal:")), **spec.env,
                     **transport.pop("environment", {}), "HARNESS_SANDBOX_TOKEN": token},
        detach=True,
        nano_cpus=int(spec.cpus * 1e9),
        pids_limit=spec.pids,
        security_opt=["no-new-privileges"],
        cap_drop=["ALL"],
        **({"user": spec.user} if spec.user is not None else {}),
        # The disk limit, the memory limit that goes with it (no swap: a memory hog is OOM-killed,
        # not slowed to a crawl), and the capped log (storage.py).
        **storage.create_options(spec),
        **transport,
    )


def _network_options(policy: str) -> dict:
    if policy == "internet":
        return {"network": "bridge"}
    options: dict[str, object] = {"network": networks.ensure_isolated(), "dns_opt": networks.ISOLATED_DNS_OPTIONS}
    if policy.startswith("internal:"):
        if hosts := website_hosts(policy.split(":", 1)[1]):  # this process's --website: its name in /etc/hosts
            options["extra_hosts"] = hosts
    return options


def _remove_by_name(name: str) -> None:
    try:
        found = engine.call("list", lambda: engine.client().api.containers(
            all=True, filters={"label": f"{naming.LABEL_NAME}={name}"}))
        for row in found:
            engine.remove_container(row["Id"])
    except Exception:  # noqa: BLE001 - best effort; the orphan reaper is the backstop
        pass


def _create(cli, kwargs: dict) -> str:
    """The new container's id: the SDK's `containers.create` with its own argument conversion, without the
    inspect it makes right after (the start's inspect below is the one the harness needs)."""
    args = {**kwargs, "command": kwargs.get("command"), "version": cli.api._version}
    from docker.models.containers import _create_container_args

    return str(cli.api.create_container(**_create_container_args(args))["Id"])


def _create_and_start(kwargs: dict, policy: str, host_port: int | None) -> tuple[str, dict, int]:
    """The container's id, its inspect (empty for the socket transport, which needs none) and published port (0
    for the socket transport)."""
    cli = engine.client()
    unix = kwargs.get("network_disabled", False)
    try:
        # No retry: a create that timed out on our side may still have made the container.
        options = kwargs if unix else {**kwargs, "ports": ports.publish(host_port)}
        cid = engine.call("create", lambda: _create(cli, options), retries=0)
    except BaseException:
        _remove_by_name(kwargs["labels"][naming.LABEL_NAME])
        raise
    try:
        if unix:
            engine.call("start", lambda: cli.api.start(cid), retries=0)
            return cid, {}, 0
        networks.connect(cid, policy)
        engine.call("start", lambda: cli.api.start(cid), retries=0)
        attrs = engine.call("inspect", lambda: cli.api.inspect_container(cid))
        return cid, attrs, ports.read_port(attrs)
    except BaseException:
        engine.remove_container(cid)  # a failed start leaves a Created container behind
        raise


def _start_in_range(kwargs: dict, policy: str, port_range: range):
    """Take the first free port of the range; when every port is held, wait (lock released) for one
    to free up: a range smaller than the run's concurrency makes workers take turns, up to
    HARNESS_PORT_WAIT seconds."""
    deadline = time.monotonic() + settings().port_wait
    pause = 0.2
    while True:
        with ports.range_lock():
            used = ports.ports_in_use()
            for port in port_range:
                if port in used or (engine.engine_is_local() and not ports.free_locally(port)):
                    continue
                try:
                    return _create_and_start(kwargs, policy, port)
                except PortTaken:
                    continue  # held by a process the checks above do not see, or another machine's start
        if time.monotonic() >= deadline:
            raise InfraError(f"no port of HARNESS_PORT_RANGE ({port_range.start}-{port_range.stop - 1}) freed up "
                             f"in {settings().port_wait:g} s (HARNESS_PORT_WAIT)")
        time.sleep(pause)
        pause = min(pause * 2, 2.0)


class DockerProvider(SandboxProvider):
    name = NAME
    capabilities = Capabilities(website=True, web_proxy=True, images=True)
    # attach(): every agent process speaks to sandboxd through the service client and its HTTP library (imported
    # lazily there, so a run that starts no sandbox never loads it; a forked agent importing it paid ~18 ms)
    preload = ("harness.sandbox.service", "urllib3")

    def preflight(self, *, network: str = "none", log=print) -> str:
        engine.client()  # EngineUnavailable when nothing answers
        ports.port_range()  # a bad HARNESS_PORT_RANGE is an input error now
        image = images.build(log=log)
        networks.check_policy(network, log)  # an internal:NAME network must exist
        return image

    def check_image(self, name: str) -> None:
        task_images.check_image(name)

    def image_of(self, name: str, *, log=print, build_timeout: float | None = None) -> str:
        # a task's own build context, or images/NAME
        return task_images.image_of(name, log=log, build_timeout=build_timeout)

    def image_ref(self) -> str:
        return images.sandbox_tag()  # what preflight's images.build returns: the tree hash of the build context

    def prepare(self, *, network: str = "none", log=print) -> None:
        if network != "internet" and not sockets.wanted(network):  # a sandbox with no network needs none
            networks.ensure_isolated(log)  # with its firewall (one warning when the rules cannot be applied)

    def capacity(self) -> Capacity:
        info = engine.info()
        return Capacity(cpus=float(info.get("NCPU") or 0), memory=int(info.get("MemTotal") or 0))

    def start(self, spec: SandboxSpec) -> DockerSandbox:
        try:
            return self._start(spec)
        except UnknownUser as exc:  # the task's doing, not the engine's
            raise InputError(f"the image {spec.image} has no user {spec.user!r} for its sandbox to run as (the "
                             "task's own user)") from exc

    def _start(self, spec: SandboxSpec) -> DockerSandbox:
        name = naming.container_name(spec.run_id, spec.instance_id, spec.attempt)
        token = secrets.token_urlsafe(24)
        unix = sockets.wanted(spec.network)
        with engine.start_gate():
            if unix:
                try:
                    kwargs = _create_kwargs(spec, name, token, unix=True)
                    cid, attrs, port = _create_and_start(kwargs, spec.network, None)
                except MountSourceUnseen as exc:
                    sockets.remove(name)
                    sockets.give_up(f"the engine does not see this machine's {sockets.paths(name)[0].parent} ({exc})")
                    unix = False
                except BaseException:
                    sockets.remove(name)  # the handoff socket this process listens on
                    raise
            if not unix:
                kwargs, port_range = _create_kwargs(spec, name, token), ports.port_range()
                if port_range is None:
                    cid, attrs, port = _create_and_start(kwargs, spec.network, None)
                else:
                    cid, attrs, port = _start_in_range(kwargs, spec.network, port_range)
        still_starting = lambda: engine.raise_if_dead(cid, name, agent_ran=False)  # noqa: E731
        try:
            socket = sockets.take(name, settings().sandbox_ready_timeout, still_starting) if unix else None
        except BaseException:
            engine.remove_container(cid)
            sockets.remove(name)
            raise
        sandbox = DockerSandbox(spec, cid, name, engine.sandbox_host(), port, token, socket,
                                spec.workdir or storage.workdir(spec.image))
        if storage.writable_root(spec):  # its writable layer, bounded by a watcher (diskwatch.py)
            diskwatch.watch(cid, storage.writable_root_places(spec.image, parse_size(spec.disk))[1])
        try:
            webproxy.register(spec, attrs)  # the proxy's records name this instance and attempt
            sandbox._service.wait_ready(settings().sandbox_ready_timeout, still_starting)
        except BaseException:
            self.teardown(sandbox)
            raise
        return sandbox

    def attach(self, handle: SandboxHandle) -> DockerSandbox:
        if handle.provider != NAME:
            raise ValueError(f"a {handle.provider} handle cannot be attached by the docker provider")
        return DockerSandbox(handle.spec, handle.ref["container_id"], handle.name, handle.host, handle.port,
                             handle.token, handle.socket, handle.workdir)

    def teardown(self, sandbox: Sandbox) -> None:
        assert isinstance(sandbox, DockerSandbox)
        sandbox.close()
        diskwatch.stop(sandbox.id)
        if sandbox._service.socket is not None:  # first: a harness killed during the removal leaves no socket
            sockets.remove(sandbox.name)
        engine.remove_container(sandbox.id)

    def find(self, run_id: str | None = None) -> list[Leftover]:
        return cleanup.find(run_id)

    def cleanup(self, *, run_id: str | None = None, everything: bool = False,
                dry_run: bool = False) -> list[Leftover]:
        return cleanup.reap(run_id=run_id, everything=everything, dry_run=dry_run)

    def web_proxy(self, mode: str, run_id: str, network: str | None, **options):
        """The run's recording or replaying web proxy (webproxy.py); yields it once it listens."""
        hosts = website_hosts(network.removeprefix("internal:")) if network else None
        return webproxy.web_proxy(mode, run_id, network.removeprefix("internal:") if network else None,
                                  hosts=hosts, **options)

    def website(self, site_dir: Path, image: str, run_id: str):
        from harness.sandbox.docker.website import website

        return website(site_dir, image, run_id)

    # Images are this provider's own business; the CLI reaches them through these.
    def build_image(self, *, force: bool = False, log=print) -> str:
        return images.build(force=force, log=log)

    def list_images(self) -> list[ImageInfo]:
        return images.list_images()

    def prune_images(self, log=print) -> list[str]:
        return images.prune(log=log)
