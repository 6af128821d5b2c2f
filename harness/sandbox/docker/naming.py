"""Container names and labels.

A sandbox's name is its `harness.name` label (the container itself has no Docker name,
see networks.py); names keep to Docker's rule [a-zA-Z0-9][a-zA-Z0-9_.-]+ all the same,
while instance ids in user datasets can be anything (spaces, unicode, slashes, 300
characters). A name keeps a readable slug of each part plus a hash of the exact instance id and a
random suffix, so two ids that slugify alike still never collide.

Owners. Every container and network the harness makes carries the owner label (LABEL_OWNER),
which `harness cleanup` reads to tell orphans from the containers of a run still going:
- a harness process on a host: "HOST:PID:STARTTIME" (STARTTIME guards against PID reuse);
- a harness process inside a Docker container C (the docker-compose service, see docs/sandboxes.md):
  "ctr:ENGINE:C:PID:STARTTIME", where ENGINE is a short digest of the id of the engine that runs
  C, or "-" when the engine the harness drives does not know C (a remote engine). Inside a
  container neither the hostname (shared with `network_mode: host`) nor the PID (another PID
  namespace) names the process for anyone outside it, so the token names the container.
owner_alive(owner) is True while the owner may still run (never reap), False once it is
certainly gone, None when this process cannot tell (never reap either):
- host form: judged on the same host (hostname) outside containers only, by PID and start time;
  another host's, or any host owner seen from inside a container, is None;
- container form, seen from inside that same container: by PID and start time;
- container form, seen from elsewhere through the engine that runs C (same ENGINE): True while C
  is running (or paused/restarting), False when C has exited or no longer exists; through another
  engine, or with ENGINE "-", None. (So from outside, a long-lived container's dead harness
  processes are reaped once the container stops, or by a cleanup run inside it.)
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import os
import re
import secrets
import socket
import threading

from harness.fsutil import slug

PREFIX = "harness"
LABEL_MANAGED = "harness.managed"
LABEL_RUN = "harness.run_id"
LABEL_INSTANCE = "harness.instance_id"
LABEL_ATTEMPT = "harness.attempt"
LABEL_OWNER = "harness.owner"  # who made it: owner_token() (module docstring)
LABEL_CREATED = "harness.created"
# The sandbox's name. Sandbox containers carry no Docker name (the embedded DNS would give it
# away to other sandboxes, see networks.py): this label is their name for the harness.
LABEL_NAME = "harness.name"
# A recording web proxy's: the file its archive is kept in before the container goes (webproxy.py, cleanup.py).
LABEL_WEB_ARCHIVE = "harness.web_archive"

MAX_NAME = 63  # fits a DNS label, so names stay usable as hostnames too


def container_name(run_id: str, instance_id: str, attempt: int) -> str:
    digest = hashlib.sha256(instance_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    tail = f"-{digest}-a{attempt}-{secrets.token_hex(2)}"
    head = f"{PREFIX}-{slug(run_id, 16)}-"
    return head + slug(instance_id, MAX_NAME - len(head) - len(tail)) + tail


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (guards against PID reuse)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
        return stat[stat.rfind(")") + 2 :].split()[19]
    except (OSError, IndexError):
        return "?"


CONTAINER_FORM = "ctr"
# Docker bind-mounts these three files of every container from <data-root>/containers/<id>/;
# /proc/self/mountinfo shows that source whatever the cgroup version, namespaces or hostname.
_DOCKER_MOUNTS = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf")
_CONTAINER_SOURCE = re.compile(r"/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf)$")


def own_container_id(mountinfo: str | None = None) -> str | None:
    """The id of the Docker container this process runs in; None on a host (or unreadable).
    Given `mountinfo` (the text of /proc/self/mountinfo), the id that text names."""
    if mountinfo is None:
        return _own_container_id()
    for line in mountinfo.splitlines():
        fields = line.split()
        # fields: id, parent, major:minor, root (the source inside its filesystem), mount point, ...
        if len(fields) > 4 and fields[4] in _DOCKER_MOUNTS and (found := _CONTAINER_SOURCE.search(fields[3])):
            return found.group(1)
    return None


@functools.cache
def _own_container_id() -> str | None:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            return own_container_id(fh.read())
    except OSError:
        return None


def engine_key(engine_id: str) -> str:
    """The short form of an engine's id (`docker info` ID) that container owner tokens carry."""
    return hashlib.sha256(engine_id.encode()).hexdigest()[:12]


# Asked once per process (the process drives one engine through engine.client()); a failed
# look-up is not remembered, so the next call asks again.
_lock = threading.Lock()
_engine: str | None = None
_identity: tuple[str, str] | None = None  # (ENGINE or "-", container id)


def _current_engine_key() -> str | None:
    """engine_key of the engine this process drives; None when it cannot be asked."""
    global _engine
    if _engine is None:
        from harness.sandbox.docker import engine

        try:
            _engine = engine_key(engine.call("info", lambda: engine.client().info(), retries=0)["ID"])
        except Exception:  # noqa: BLE001 - no engine, no answer: the caller treats it as "cannot tell"
            return None
    return _engine


def _container_identity(container: str) -> tuple[str, str]:
    """(ENGINE, C) of the token: ENGINE only when the engine we drive runs our container C."""
    global _identity
    with _lock:
        if _identity is not None and _identity[1] == container:
            return _identity
        from harness.sandbox.docker import engine

        try:
            known = bool(engine.container_state(container))  # {} when this engine does not know C
        except Exception:  # noqa: BLE001 - engine unreachable now: "-" this time (nobody outside reaps by it)
            return ("-", container)
        key = _current_engine_key() if known else "-"
        if key is None:
            return ("-", container)
        _identity = (key, container)
        return _identity


def _pid_alive(pid: str, start: str) -> bool:
    return pid.isdigit() and os.path.exists(f"/proc/{pid}") and _start_time(int(pid)) == start


def owner_token(pid: int | None = None) -> str:
    """This process's owner label (module docstring): host form, or container form in a container."""
    pid = os.getpid() if pid is None else pid
    container = own_container_id()
    if container is None:
        return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"
    key, container = _container_identity(container)
    return f"{CONTAINER_FORM}:{key}:{container}:{pid}:{_start_time(pid)}"


def owner_alive(owner: str) -> bool | None:
    """True while the owner may still run, False once it is gone, None when this process cannot
    tell (module docstring); only False ever lets `harness cleanup` remove a container."""
    if owner.startswith(CONTAINER_FORM + ":"):
        return _container_owner_alive(owner)
    try:
        host, pid, start = owner.rsplit(":", 2)
    except ValueError:
        return None
    if host != socket.gethostname() or own_container_id() is not None:
        return None  # another host's, or our PIDs are not the host's (a container's namespace)
    return _pid_alive(pid, start)


def _container_owner_alive(owner: str) -> bool | None:
    parts = owner.split(":")
    if len(parts) != 5 or not re.fullmatch(r"[0-9a-f]{64}", parts[2]):
        return None
    _, key, container, pid, start = parts
    if own_container_id() == container:
        return _pid_alive(pid, start)  # same container, same PID namespace
    if key == "-" or key != _current_engine_key():
        return None  # the owner's container runs on an engine we do not drive (or unknown)
    from harness.sandbox.docker import engine

    try:
        state = engine.container_state(container)
    except Exception:  # noqa: BLE001 - cannot ask: cannot tell
        return None
    if not state:
        return False  # the container is gone (docker-compose run --rm removed it)
    return bool(state.get("Running") or state.get("Paused") or state.get("Restarting"))


def labels(run_id: str, instance_id: str, attempt: int) -> dict[str, str]:
    return {
        LABEL_MANAGED: "1",
        LABEL_RUN: run_id,
        LABEL_INSTANCE: instance_id,
        LABEL_ATTEMPT: str(attempt),
        LABEL_OWNER: owner_token(),
        LABEL_CREATED: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
