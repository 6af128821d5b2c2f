"""Every call to the Docker engine goes through here.

This module holds the client, each timeout, each retry and the concurrency gate:
code elsewhere builds the SDK call and passes it to `call`, which retries what is
safe to retry (transient errors, `retries=0` for calls that must not run twice) and
maps engine failures to InfraError. Its tunables are HARNESS_DOCKER_* settings
(harness/settings.py). The shared client is never reconfigured: a call that needs
another timeout gets a client of its own from `new_client`.
"""

from __future__ import annotations

import functools
import os
import random
import threading
import time
import urllib.parse
from typing import Callable, TypeVar

import docker
import docker.errors
import requests.exceptions

from harness.errors import EngineUnavailable, InfraError, SandboxDied, SandboxExhausted
from harness.settings import settings

# Why the defaults (harness/settings.py): dockerd on a loaded 2-core machine can take
# seconds per create/start/remove, yet a stuck call must end (docker_timeout); beyond ~4
# parallel starts the engine only queues them and long queues turn into API timeouts
# (docker_max_starts); a 500 during a storm of starts is worth retrying (docker_retries);
# every worker thread shares one client, and the SDK's default pool of 10 makes the 11th
# concurrent call wait (docker_pool).
_lock = threading.Lock()
_client: docker.DockerClient | None = None
_gate: threading.BoundedSemaphore | None = None

T = TypeVar("T")


def new_client(timeout: float | None = None) -> docker.DockerClient:
    """A client of its own (the caller closes it), e.g. for a call with another timeout."""
    try:
        made = docker.from_env(timeout=int(timeout or settings().docker_timeout),
                               max_pool_size=settings().docker_pool)
        made.ping()
        return made
    except docker.errors.DockerException as exc:
        raise EngineUnavailable(
            f"no Docker engine answers ({exc}); run scripts/ensure-docker.sh or set DOCKER_HOST") from exc


def client() -> docker.DockerClient:
    """One client per process, created on first use (version negotiated once)."""
    global _client
    with _lock:
        if _client is None:
            _client = new_client()
        return _client


def start_gate() -> threading.BoundedSemaphore:
    """Held around each create+start: at most docker_max_starts at once in this process."""
    global _gate
    with _lock:
        if _gate is None:
            _gate = threading.BoundedSemaphore(settings().docker_max_starts)
        return _gate


def sandbox_host() -> str:
    """Address at which published sandbox ports are reached from this process."""
    explicit = settings().sandbox_host
    if explicit:
        return explicit
    url = urllib.parse.urlsplit(os.environ.get("DOCKER_HOST", ""))
    if url.scheme in ("tcp", "ssh", "http", "https") and url.hostname:
        return url.hostname
    return "127.0.0.1"


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
        return True
    if isinstance(exc, docker.errors.APIError):
        status = exc.status_code or 0
        text = str(exc).lower()
        if "port is already allocated" in text or "address already in use" in text:
            return False  # the port allocator decides what to do about these
        return status >= 500 or status == 429
    return False


def call(what: str, fn: Callable[[], T], *, retries: int | None = None) -> T:
    """Run one engine call, retrying transient failures; map failures to InfraError."""
    attempts = 1 + (settings().docker_retries if retries is None else retries)
    for attempt in range(attempts):
        try:
            return fn()
        except docker.errors.NotFound:
            raise
        except Exception as exc:  # noqa: BLE001 - classified below
            if not is_transient(exc) or attempt == attempts - 1:
                if isinstance(exc, (docker.errors.DockerException, requests.exceptions.RequestException)):
                    raise InfraError(f"docker {what} failed: {exc}") from exc
                raise
            time.sleep(settings().docker_backoff * (2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def container_state(container_id: str) -> dict:
    """The container's State dict, or {} when it no longer exists."""
    try:
        attrs = call("inspect", lambda: client().api.inspect_container(container_id))
    except docker.errors.NotFound:
        return {}
    return attrs.get("State", {})


def raise_if_dead(container_id: str, name: str, cause: BaseException | None = None, *,
                  agent_ran: bool = True) -> None:
    """SandboxDied when the container is gone or stopped; SandboxExhausted (the agent's error) when
    the kernel killed it for memory after agent code ran in it (agent_ran=False: while starting)."""
    state = container_state(container_id)
    if state.get("Running") and not state.get("Restarting"):
        return
    if not state:
        raise SandboxDied(f"sandbox {name} no longer exists") from cause
    detail = f"status={state.get('Status')} exit_code={state.get('ExitCode')}"
    if state.get("OOMKilled") and agent_ran:
        # The kernel killed it for memory: the agent's code used it all up (sandboxd itself
        # is the OOM killer's last choice), so this is the agent's error and not retried.
        raise SandboxExhausted(f"sandbox {name} died: {detail} (killed: out of memory, used up by the agent's "
                               f"code)") from cause
    if state.get("OOMKilled"):
        detail += " (killed: out of memory while starting: is --memory too small?)"
    raise SandboxDied(f"sandbox {name} died: {detail}") from cause


def remove_container(container_id: str) -> None:
    """Force-remove with volumes; gone already, or being removed by someone else, is fine."""
    try:
        call("remove", lambda: client().api.remove_container(container_id, force=True, v=True))
    except docker.errors.NotFound:
        pass
    except InfraError as exc:
        # Another process (a concurrent `harness cleanup`) may be removing it right now.
        if "already in progress" not in str(exc):
            raise


def remove_network(name: str) -> None:
    """Remove a harness network; already gone is fine."""
    try:
        call("network remove", lambda: client().api.remove_network(name))
    except docker.errors.NotFound:
        pass


@functools.cache
def engine_is_local() -> bool:
    return sandbox_host() in ("127.0.0.1", "localhost", "::1")
