"""Container names and labels.

A sandbox's name is its `harness.name` label (the container itself has no Docker name,
see networks.py); names keep to Docker's rule [a-zA-Z0-9][a-zA-Z0-9_.-]+ all the same,
while instance ids in user datasets can be anything (spaces, unicode, slashes, 300
characters). A name keeps a readable slug of each part plus a hash of the exact instance id and a
random suffix, so two ids that slugify alike still never collide.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import secrets
import socket

from harness.fsutil import slug

PREFIX = "harness"
LABEL_MANAGED = "harness.managed"
LABEL_RUN = "harness.run_id"
LABEL_INSTANCE = "harness.instance_id"
LABEL_ATTEMPT = "harness.attempt"
LABEL_OWNER = "harness.owner"  # "host:pid:starttime" of the process that made it
LABEL_CREATED = "harness.created"
# The sandbox's name. Sandbox containers carry no Docker name (the embedded DNS would give it
# away to other sandboxes, see networks.py): this label is their name for the harness.
LABEL_NAME = "harness.name"

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


def owner_token(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def owner_alive(owner: str) -> bool | None:
    """True/False for owners on this host; None when the owner is another host's."""
    try:
        host, pid, start = owner.rsplit(":", 2)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    return os.path.exists(f"/proc/{pid}") and _start_time(int(pid)) == start


def labels(run_id: str, instance_id: str, attempt: int) -> dict[str, str]:
    return {
        LABEL_MANAGED: "1",
        LABEL_RUN: run_id,
        LABEL_INSTANCE: instance_id,
        LABEL_ATTEMPT: str(attempt),
        LABEL_OWNER: owner_token(),
        LABEL_CREATED: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
