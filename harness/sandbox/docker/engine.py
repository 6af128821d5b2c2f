"""Every call to the Docker engine goes through here.

This module holds the client, each timeout, each retry and the concurrency gate,
so the rest of the sandbox code never talks to the SDK directly. Every constant
can be overridden by an environment variable of the same name.
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

from harness.errors import EngineUnavailable, InfraError, SandboxDied


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


# HTTP timeout of one engine API call. dockerd on a loaded 2-core machine can take
# several seconds to create/start/remove; a stuck call must still end.
HARNESS_DOCKER_TIMEOUT = _env_float("HARNESS_DOCKER_TIMEOUT", 120)
# Parallel create+start calls. Beyond ~4 the engine only queues them (throughput is
# flat beyond 4 workers on 2 cores) and long queues turn into API timeouts.
HARNESS_DOCKER_MAX_STARTS = int(_env_float("HARNESS_DOCKER_MAX_STARTS", 4))
# Transient engine failures (a 500 during a storm of starts, a dropped connection)
# are retried this many times with jittered exponential backoff.
HARNESS_DOCKER_RETRIES = int(_env_float("HARNESS_DOCKER_RETRIES", 3))
HARNESS_DOCKER_BACKOFF = _env_float("HARNESS_DOCKER_BACKOFF", 0.5)
# HTTP connections per client: every worker thread shares one client, and the SDK's
# default pool of 10 makes the 11th concurrent call wait or warn.
HARNESS_DOCKER_POOL = int(_env_float("HARNESS_DOCKER_POOL", 64))

START_GATE = threading.BoundedSemaphore(HARNESS_DOCKER_MAX_STARTS)
_client_lock = threading.Lock()
_client: docker.DockerClient | None = None

T = TypeVar("T")


def client() -> docker.DockerClient:
    """One client per process, created on first use (version negotiated once)."""
    global _client
    with _client_lock:
        if _client is None:
            try:
                _client = docker.from_env(
                    timeout=int(HARNESS_DOCKER_TIMEOUT), max_pool_size=HARNESS_DOCKER_POOL
                )
                _client.ping()
            except docker.errors.DockerException as exc:
                raise EngineUnavailable(
                    f"no Docker engine answers ({exc}); run scripts/ensure-docker.sh "
                    "or set DOCKER_HOST"
                ) from exc
        return _client


def reset_client() -> None:
    """Forget the client (after fork: sockets must not be shared across processes)."""
    global _client
    with _client_lock:
        _client = None


def sandbox_host() -> str:
    """Address at which published sandbox ports are reached from this process."""
    explicit = os.environ.get("HARNESS_SANDBOX_HOST")
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
    attempts = 1 + (HARNESS_DOCKER_RETRIES if retries is None else retries)
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
            time.sleep(HARNESS_DOCKER_BACKOFF * (2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def container_state(container_id: str) -> dict:
    """The container's State dict, or {} when it no longer exists."""
    try:
        attrs = call("inspect", lambda: client().api.inspect_container(container_id))
    except docker.errors.NotFound:
        return {}
    return attrs.get("State", {})


def raise_if_dead(container_id: str, name: str, cause: BaseException | None = None) -> None:
    state = container_state(container_id)
    if state.get("Running") and not state.get("Restarting"):
        return
    if not state:
        raise SandboxDied(f"sandbox {name} no longer exists") from cause
    detail = f"status={state.get('Status')} exit_code={state.get('ExitCode')}"
    if state.get("OOMKilled"):
        detail += " (killed: out of memory)"
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
