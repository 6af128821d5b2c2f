"""Docker sandboxes: start one per instance, talk to its service, always remove it."""

from __future__ import annotations

import os
import secrets
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping, Sequence


from harness.errors import InfraError, InputError
from harness.sandbox.contract import DEFAULT_MAX_OUTPUT, WORKSPACE, ExecResult, Sandbox, SandboxSpec
from harness.sandbox.docker import engine, naming, networks, ports
from harness.sandbox.files import build_archive
from harness.sandbox.service import RequestRefused, ServiceClient, ServiceUnreachable

# Time for sandboxd to answer after the container starts. Python starts in ~50 ms;
# a busy engine on 2 cores can stretch that to seconds, a broken image never answers.
READY_TIMEOUT_S = float(os.environ.get("HARNESS_SANDBOX_READY_TIMEOUT", 60))


class DockerSandbox(Sandbox):
    def __init__(self, spec: SandboxSpec, container_id: str, name: str, host: str, port: int, token: str):
        self.spec, self.id, self.name = spec, container_id, name
        self._host, self._port = host, port
        self.service = ServiceClient(host, port, token)

    @property
    def endpoint(self) -> tuple[str, int]:
        return self._host, self._port

    def _died_or(self, exc: ServiceUnreachable) -> InfraError:
        engine.raise_if_dead(self.id, self.name, exc)  # raises SandboxDied if gone
        time.sleep(0.5)  # the engine may not have noticed the exit yet
        engine.raise_if_dead(self.id, self.name, exc)
        return exc

    def exec(self, argv: Sequence[str], *, timeout: float = 60, stdin: str | None = None,
             cwd: str = WORKSPACE, env: Mapping[str, str] | None = None,
             max_output: int = DEFAULT_MAX_OUTPUT) -> ExecResult:
        payload = {"argv": list(argv), "timeout": timeout, "stdin": stdin, "cwd": cwd,
                   "env": dict(env or {}), "max_output": max_output}
        try:
            data = self.service.exec(payload, timeout)
        except ServiceUnreachable as exc:
            raise self._died_or(exc) from exc
        return ExecResult(**data)

    def copy_in(self, root: Path, names: Sequence[str], dest: str = WORKSPACE) -> list[str]:
        archive = build_archive(root, names)  # raises InputError before touching the sandbox
        try:
            return self.service.upload(archive, dest)
        except ServiceUnreachable as exc:
            raise self._died_or(exc) from exc
        except RequestRefused as exc:
            raise InputError(f"sandbox refused the files: {exc.message}") from exc

    def read_file(self, path: str) -> bytes:
        try:
            return self.service.read_file(path)
        except ServiceUnreachable as exc:
            raise self._died_or(exc) from exc
        except RequestRefused as exc:
            if exc.status == 404:
                raise FileNotFoundError(path) from exc
            raise OSError(f"cannot read {path}: {exc.message}") from exc


def _create_kwargs(spec: SandboxSpec, name: str, token: str) -> dict:
    return dict(
        image=spec.image,
        name=name,
        labels=naming.labels(spec.run_id, spec.instance_id, spec.attempt),
        environment={**spec.env, "HARNESS_SANDBOX_TOKEN": token},
        detach=True,
        mem_limit=spec.memory,
        memswap_limit=spec.memory,  # no swap: a memory hog is OOM-killed, not slowed to a crawl
        nano_cpus=int(spec.cpus * 1e9),
        pids_limit=spec.pids,
        security_opt=["no-new-privileges"],
        cap_drop=["ALL"],
        **networks.create_options(spec.network),
    )


def _remove(container_id: str) -> None:
    engine.remove_container(container_id)


def _remove_by_name(name: str) -> None:
    try:
        found = engine.client().api.containers(all=True, filters={"name": f"^/{name}$"})
        for row in found:
            engine.remove_container(row["Id"])
    except Exception:  # noqa: BLE001 - best effort; the orphan reaper is the backstop
        pass


def _create_and_start(kwargs: dict, policy: str, host_port: int | None):
    cli = engine.client()
    try:
        # No retry: a create that timed out on our side may still have made the container.
        container = engine.call("create", lambda: cli.containers.create(ports=ports.publish(host_port), **kwargs),
                                retries=0)
    except BaseException:
        _remove_by_name(kwargs["name"])
        raise
    try:
        networks.connect(container.id, policy)
        engine.call("start", container.start, retries=0)
        container.reload()
        return container, ports.read_port(container.attrs)
    except BaseException:
        _remove(container.id)  # a failed start leaves a Created container behind
        raise


def _start_in_range(kwargs: dict, policy: str, port_range: range):
    with ports.range_lock():
        used = ports.ports_in_use(engine.client().api)
        for port in port_range:
            if port in used or (engine.engine_is_local() and not ports.free_locally(port)):
                continue
            try:
                return _create_and_start(kwargs, policy, port)
            except InfraError as exc:
                if not ports.is_port_taken_error(exc):
                    raise
        raise InfraError(f"no free port in HARNESS_PORT_RANGE ({port_range.start}-{port_range.stop - 1})")


def start(spec: SandboxSpec) -> DockerSandbox:
    name = naming.container_name(spec.run_id, spec.instance_id, spec.attempt)
    token = secrets.token_urlsafe(24)
    kwargs = _create_kwargs(spec, name, token)
    port_range = ports.port_range()
    with engine.START_GATE:
        if port_range is None:
            container, port = _create_and_start(kwargs, spec.network, None)
        else:
            container, port = _start_in_range(kwargs, spec.network, port_range)
    sandbox = DockerSandbox(spec, container.id, name, engine.sandbox_host(), port, token)
    try:
        sandbox.service.wait_ready(READY_TIMEOUT_S, lambda: engine.raise_if_dead(container.id, name))
    except BaseException:
        teardown(sandbox)
        raise
    return sandbox


def teardown(sandbox: DockerSandbox) -> None:
    sandbox.service.close()
    _remove(sandbox.id)


@contextmanager
def open_sandbox(spec: SandboxSpec) -> Iterator[DockerSandbox]:
    """Start a sandbox and remove it on every way out of the block."""
    sandbox = start(spec)
    try:
        yield sandbox
    finally:
        teardown(sandbox)
