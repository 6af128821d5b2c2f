"""Every call to the Docker engine goes through here.

This module holds the client, each timeout, each retry and the concurrency gate:
code elsewhere builds the SDK call and passes it to `call`, which retries what is
safe to retry (transient errors, `retries=0` for calls that must not run twice) and
maps engine failures to InfraError. An engine's refusal of a cause the harness decides on is
classified here and nowhere else (`refusal`: by the answer's status, and by its words only where
the status does not tell) and raised as its type from harness/errors.py: EngineNotFound,
EngineConflict, EngineInUse, PortTaken. Its tunables are HARNESS_DOCKER_* settings
(harness/settings.py). The shared client is never reconfigured: a call that needs
another timeout gets a client of its own from `new_client`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from harness.errors import (
    EngineConflict,
    EngineInUse,
    EngineKillTimedOut,
    EngineNotFound,
    EngineRefused,
    EngineUnavailable,
    InfraError,
    InputError,
    MountSourceUnseen,
    PortTaken,
    SandboxDied,
    SandboxDiskLimit,
    SandboxExhausted,
    UnknownUser,
)
from harness.settings import settings, state_dir

if TYPE_CHECKING:  # imported where a call needs it (with requests and urllib3, ~0.15 s): a run with
    import docker  # nothing to do never calls the engine (runner/phases/idle.py)

# Why the defaults (harness/settings.py): dockerd on a loaded 2-core machine can take
# seconds per create/start/remove, yet a stuck call must end (docker_timeout); beyond ~4
# parallel starts the engine only queues them and long queues turn into API timeouts
# (docker_max_starts); a 500 during a storm of starts is worth retrying (docker_retries);
# every worker thread shares one client, and the SDK's default pool of 10 makes the 11th
# concurrent call wait (docker_pool).
_lock = threading.Lock()
_client: docker.DockerClient | None = None
_gate: threading.BoundedSemaphore | None = None
_info_lock = threading.Lock()
_info: dict | None = None


def _forget_in_child() -> None:
    """A forked process (the agents' fork server, runner/agent_process/forkserver.py) must not share the parent's
    connections to the engine: it makes its own on first use."""
    global _lock, _client, _gate, _info_lock, _info
    _lock, _client, _gate, _info_lock, _info = threading.Lock(), None, None, threading.Lock(), None


os.register_at_fork(after_in_child=_forget_in_child)

T = TypeVar("T")


def engine_url() -> str | None:
    """The engine this process talks to: --docker-host / HARNESS_DOCKER_HOST, else DOCKER_HOST,
    else None (the local socket). Agent processes inherit it through the environment."""
    return settings().docker_host or os.environ.get("DOCKER_HOST") or None


def key() -> str:
    """A short name of the engine this process talks to, for files of this machine kept per engine."""
    return hashlib.sha256((engine_url() or "local").encode()).hexdigest()[:12]


def lock_path(kind: str) -> Path:
    """The machine-wide lock file of `kind` ("images", "reap") on the engine this process talks to."""
    return state_dir() / f"{kind}-{key()}.lock"


def tls_config(url: str | None = None):
    """TLS client settings for a tcp:// engine: HARNESS_DOCKER_CERT_PATH, else DOCKER_CERT_PATH when
    DOCKER_TLS_VERIFY is set (Docker's own convention); None for plain TCP, unix and ssh."""
    url = engine_url() if url is None else url
    if not url or urllib.parse.urlsplit(url).scheme not in ("tcp", "https"):
        return None
    path = settings().docker_cert_path
    if path is None and os.environ.get("DOCKER_TLS_VERIFY") and os.environ.get("DOCKER_CERT_PATH"):
        path = Path(os.environ["DOCKER_CERT_PATH"])
    if path is None:
        return None
    files = {name: path / name for name in ("ca.pem", "cert.pem", "key.pem")}
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        raise InputError(f"HARNESS_DOCKER_CERT_PATH {path}: missing {', '.join(missing)}")
    import docker.tls

    return docker.tls.TLSConfig(client_cert=(str(files["cert.pem"]), str(files["key.pem"])),
                                ca_cert=str(files["ca.pem"]), verify=True)


def new_client(timeout: float | None = None, url: str | None = None) -> docker.DockerClient:
    """A client of its own (the caller closes it), e.g. for a call with another timeout or for
    another engine (`url`; default: engine_url())."""
    import docker
    import docker.errors

    url = url or engine_url()
    kwargs = dict(timeout=int(timeout or settings().docker_timeout), max_pool_size=settings().docker_pool)
    try:
        tls = tls_config(url) if url else None
        if url is None:
            made = docker.from_env(**kwargs)
            if not made.api.base_url.startswith(("http://", "https://")):
                # A socket: requests would still read the proxy variables and stat ~/.netrc on every
                # call (~1 ms of CPU each), and neither applies to a socket.
                made.api.trust_env = False
        elif tls is None:
            # ssh://: the system's ssh client (the user's ~/.ssh/config, agent and known_hosts), not
            # paramiko, whose import alone costs every harness and agent process ~0.4 s.
            made = docker.DockerClient(base_url=url, use_ssh_client=url.startswith("ssh://"), **kwargs)
        else:
            made = _tls_client(url, tls, kwargs)
        made.ping()
        return made
    except docker.errors.DockerException as exc:
        where = url or "the local socket"
        raise EngineUnavailable(f"no Docker engine answers at {where} ({exc}); run scripts/ensure-docker.sh, or "
                                f"check --docker-host / HARNESS_DOCKER_HOST / DOCKER_HOST") from exc


def cli_env() -> dict[str, str]:
    """The environment for a `docker` CLI subprocess that must reach the same engine (build.sh)."""
    env = dict(os.environ)
    url = engine_url()
    if url:
        env["DOCKER_HOST"] = url
        cert_path = settings().docker_cert_path
        if cert_path and tls_config(url):
            env.update(DOCKER_TLS_VERIFY="1", DOCKER_CERT_PATH=str(cert_path))
    return env


def local_client() -> docker.DockerClient | None:
    """This machine's own engine (DOCKER_HOST, else the local socket) when the harness was pointed
    at another one with --docker-host and this one answers; otherwise None. Images are copied from it."""
    target, local = settings().docker_host, os.environ.get("DOCKER_HOST") or None
    if not target or target == local:
        return None
    try:
        return new_client(timeout=1800, url=local or "unix:///var/run/docker.sock")
    except EngineUnavailable:
        return None


def _tls_client(url: str, tls, kwargs: dict) -> docker.DockerClient:
    """A TLS client that verifies the engine with its own CA. requests would otherwise take
    REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE (set on machines behind a TLS proxy) over the client's CA on
    every request, so the session ignores the environment; the API version is asked first, since
    negotiating it in the constructor would already go through the environment's CA."""
    import docker
    import docker.constants

    probe = docker.DockerClient(base_url=url, tls=tls, version=docker.constants.MINIMUM_DOCKER_API_VERSION,
                                **kwargs)
    probe.api.trust_env = False
    try:
        version = probe.api.version(api_version=False)["ApiVersion"]
    finally:
        probe.close()
    made = docker.DockerClient(base_url=url, tls=tls, version=version, **kwargs)
    made.api.trust_env = False
    return made


def client() -> docker.DockerClient:
    """One client per process, created on first use (version negotiated once)."""
    global _client
    with _lock:
        if _client is None:
            _client = new_client()
        return _client


def info() -> dict:
    """The engine's `docker info`, asked once per process (storage driver, CPUs, memory: nothing a
    run needs of it changes during the run); concurrent first callers share one call."""
    global _info
    with _info_lock:
        if _info is None:
            _info = call("info", lambda: client().api.info())
        return _info


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
    url = urllib.parse.urlsplit(engine_url() or "")
    if url.scheme in ("tcp", "ssh", "http", "https") and url.hostname:
        return url.hostname
    return "127.0.0.1"


# (status or None for any, words of which one must be in the message or () for any, type): the first
# row that matches wins. Words only where the status is not enough: a taken port is a 500 at start
# ("Bind for 127.0.0.1:P failed: port is already allocated", or the userland proxy's "bind: address
# already in use"); a network that still has endpoints is a 403 among other 403s (a predefined network);
# a bind mount whose source the engine cannot see is a 400 among other 400s.
# A 409 on a forced container remove can only be a removal already in progress.
REFUSALS: tuple[tuple[int | None, tuple[str, ...], type[EngineRefused]], ...] = (
    (None, ("port is already allocated", "address already in use"), PortTaken),
    (None, ("has active endpoints",), EngineInUse),
    (None, ("unable to find user",), UnknownUser),
    (400, ("bind source path does not exist",), MountSourceUnseen),
    (500, ("did not receive an exit event",), EngineKillTimedOut),
    (404, (), EngineNotFound),
    (409, (), EngineConflict),
)


class BuildFailed(InfraError):
    """An image build that the engine ran and that failed at a step (its Dockerfile's doing, not the engine's)."""


class BuildTimedOut(InfraError):
    """An image build that had not ended by its deadline: its stream was closed, and the engine cancels a build
    whose client went away."""


class BuildLacksTools(BuildFailed):
    """A task image's build failed at the harness's own check that the image has python3 and bash."""


# A failed build's engine words: the step that failed is named in them (our check's own command).
BUILD_FAILURES: tuple[tuple[tuple[str, ...], type[BuildFailed]], ...] = (
    (("command -v python3",), BuildLacksTools),
)


def build_failure(tag: str, error: str, tail: list[str]) -> BuildFailed:
    """The failure of the build of `tag` whose stream said `error`, typed by BUILD_FAILURES."""
    kind = next((kind for words, kind in BUILD_FAILURES if any(w in error for w in words)), BuildFailed)
    return kind(f"building {tag} failed: {error}\n" + "\n".join(tail))


def refusal(exc: BaseException) -> type[EngineRefused] | None:
    """The type of an engine's refusal, or None when it is none the harness decides on."""
    import docker.errors

    if not isinstance(exc, docker.errors.APIError):
        return None
    status = exc.status_code
    text = str(exc).lower()
    for wanted, words, kind in REFUSALS:
        if (wanted is None or status == wanted) and (not words or any(w in text for w in words)):
            return kind
    return None


def is_transient(exc: BaseException) -> bool:
    import docker.errors
    import requests.exceptions

    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
        return True
    if isinstance(exc, docker.errors.APIError) and refusal(exc) is None:
        status = exc.status_code or 0
        return status >= 500 or status == 429
    return False


def call(what: str, fn: Callable[[], T], *, retries: int | None = None) -> T:
    """Run one engine call, retrying transient failures; map failures to InfraError, a refusal of a
    known cause to its type (see REFUSALS)."""
    attempts = 1 + (settings().docker_retries if retries is None else retries)
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - classified below
            if not is_transient(exc) or attempt == attempts - 1:
                import docker.errors
                import requests.exceptions

                if isinstance(exc, (docker.errors.DockerException, requests.exceptions.RequestException)):
                    raise (refusal(exc) or InfraError)(f"docker {what} failed: {exc}") from exc
                raise
            time.sleep(settings().docker_backoff * (2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


# The name a container is given when it is ended past its disk limit (diskwatch.py): the mark any process reads.
DISK_LIMIT_NAME = "harness-disk-limit-"


def container_attrs(container_id: str) -> dict:
    """The container's inspect, or {} when it no longer exists."""
    try:
        return call("inspect", lambda: client().api.inspect_container(container_id))
    except EngineNotFound:
        return {}


def container_state(container_id: str) -> dict:
    """The container's State dict, or {} when it no longer exists."""
    return container_attrs(container_id).get("State", {})


def raise_if_dead(container_id: str, name: str, cause: BaseException | None = None, *,
                  agent_ran: bool = True) -> None:
    """SandboxDied when the container is gone or stopped; SandboxExhausted (the agent's error) when
    the kernel killed it for memory after agent code ran in it (agent_ran=False: while starting); SandboxDiskLimit
    when it was ended for writing beyond its disk limit (diskwatch.py)."""
    attrs = container_attrs(container_id)
    state = attrs.get("State", {})
    if state.get("Running") and not state.get("Restarting"):
        return
    if not state:
        raise SandboxDied(f"sandbox {name} no longer exists") from cause
    detail = f"status={state.get('Status')} exit_code={state.get('ExitCode')}"
    if attrs.get("Name", "").lstrip("/").startswith(DISK_LIMIT_NAME):
        raise SandboxDiskLimit(f"sandbox {name} was ended: its code wrote beyond the disk limit (--disk) outside its "
                               "size-limited places") from cause
    if state.get("OOMKilled") and agent_ran:
        # The kernel killed it for memory: the agent's code used it all up (sandboxd itself
        # is the OOM killer's last choice), so this is the agent's error and not retried.
        raise SandboxExhausted(f"sandbox {name} died: {detail} (killed: out of memory, used up by the agent's "
                               f"code)") from cause
    if state.get("OOMKilled"):
        detail += " (killed: out of memory while starting: is --memory too small?)"
    raise SandboxDied(f"sandbox {name} died: {detail}") from cause


KILL_PATIENCE_S = 120.0  # how long a removal goes on asking while the engine's kill waits for the exit


def remove_container(container_id: str, *, patience: float = KILL_PATIENCE_S) -> None:
    """Force-remove with volumes; gone already, or being removed by someone else (a concurrent
    `harness cleanup`: the conflict a forced remove can meet), is fine. A container whose processes
    are slow to die (the engine's kill timed out waiting for the exit) is asked again, for `patience`
    seconds: the next kill finds fewer processes."""
    deadline = time.monotonic() + patience
    while True:
        try:
            call("remove", lambda: client().api.remove_container(container_id, force=True, v=True))
            return
        except (EngineNotFound, EngineConflict):
            return
        except EngineKillTimedOut:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1.0)


def remove_network(name: str) -> None:
    """Remove a harness network; already gone is fine (EngineInUse while a container uses it)."""
    try:
        call("network remove", lambda: client().api.remove_network(name))
    except EngineNotFound:
        pass


@functools.cache
def engine_is_local() -> bool:
    return sandbox_host() in ("127.0.0.1", "localhost", "::1")
