"""The socket transport: sandboxd on a Unix socket, in a sandbox with no network at all.

A sandbox of network policy `none` needs no network: the harness is its only peer. On a local
Linux engine it is therefore created with networking disabled (only a loopback) and a directory
of the host mounted read-only at MOUNT. The engine then makes no network namespace of its own, no
veth, bridge port, firewall rule, published port or port proxy, and runs no network hook: a
sandbox's create, start and removal cost the engine about a third of what they cost on the
`harness-none` bridge (bench/README.md), and nothing inside can reach anything outside, the host
included, whatever the firewall.

The socket sandboxd serves is the harness's, never a path the sandbox chose: the harness binds it
itself, in this user's private directory (0700, never mounted), and hands the listening socket to
sandboxd over a second one it listens on in the mounted directory (HANDOFF, named to sandboxd by
HARNESS_SANDBOX_HANDOFF): sandboxd connects there at start and receives the listening socket as a
file descriptor (SCM_RIGHTS); the harness then closes and removes the handoff socket (`take`).
The mounted directory is read-only in the sandbox, whatever its user (root included: with every
capability dropped nothing can remount it), so agent code writes nothing there: no bytes past
--disk on the host's disk, no FIFO, link or setuid file for the host to meet. Whoever connects to
a sandbox's socket checks first that it is a socket of this user (unix_http.connect: no link
followed).

Where a sandbox cannot use it, the docker provider publishes a port as before: other policies
(they need a network), a remote engine (its files are not ours), an engine in a VM (Docker Desktop:
a socket file does not cross it), and an engine that cannot see our directory: a harness inside a
container (docker-compose.yml) or an engine with a /tmp of its own. Each sandbox's directory has a
name of its own, so the engine finds it only when it sees our files: the create is refused
(`MountSourceUnseen`) and the transport is given up for the process, with one warning.
HARNESS_SANDBOX_TRANSPORT=tcp|unix decides instead.
"""

from __future__ import annotations

import array
import functools
import hashlib
import logging
import os
import shutil
import socket
import stat
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from harness.errors import InfraError
from harness.settings import settings

log = logging.getLogger(__name__)
MOUNT = "/run/harness"  # the directory inside the sandbox
HANDOFF = "handoff.sock"  # the harness's socket in the mounted directory, until sandboxd has its own
BACKLOG = 128  # sandboxd sets its own once it has the socket
_lock = threading.Lock()
_handoffs: dict[str, socket.socket] = {}  # a sandbox's name -> the handoff socket, until take
_given_up: list[str] = []  # why the transport was given up in this process (at most one entry)


def wanted(policy: str) -> bool:
    """Whether a sandbox of this network policy uses the socket transport."""
    mode = settings().sandbox_transport
    if policy != "none" or mode == "tcp" or _given_up:
        return False
    return mode == "unix" or _engine_shares_our_files()


@functools.cache
def _engine_shares_our_files() -> bool:
    from harness.sandbox.docker import engine

    url = urllib.parse.urlsplit(engine.engine_url() or "unix:///var/run/docker.sock")
    if sys.platform != "linux" or url.scheme not in ("unix", "http+unix"):
        return False
    return engine.info().get("OperatingSystem") != "Docker Desktop"


def give_up(reason: str) -> None:
    if not _given_up:
        _given_up.append(reason)
        log.warning("sandboxes publish a port from now on: %s (HARNESS_SANDBOX_TRANSPORT=tcp says so at once)",
                    reason)


@functools.cache
def _base() -> Path:
    """This user's directory for the sockets of sandboxes on this engine: short (a socket's path has at most
    107 bytes), on this machine, 0700 and ours (a directory of that name that is not is refused, never used)."""
    from harness.sandbox.docker import engine

    root = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    path = root / f"harness-{os.getuid()}"
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise InfraError(f"{path} is not a private directory of this user; remove it or set "
                         "HARNESS_SANDBOX_TRANSPORT=tcp")
    mine = path / engine.key()  # one per engine: see sweep
    mine.mkdir(mode=0o700, exist_ok=True)
    return mine


def _key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def paths(name: str) -> tuple[Path, Path]:
    """The sandbox's mounted directory and the private path of the socket sandboxd serves."""
    key = _key(name)
    return _base() / key, _base() / f"{key}.sock"


def mount_options(name: str) -> dict:
    """Create options for a sandbox named `name`: its directory, mounted read-only, holding the handoff socket
    the harness listens on until `take` (kept open in this process meanwhile)."""
    from docker.types import Mount

    directory, _ = paths(name)
    directory.mkdir(mode=0o711, exist_ok=True)
    os.chmod(directory, 0o711)  # any user of the sandbox may reach the handoff socket; nobody lists or writes
    handoff = directory / HANDOFF
    handoff.unlink(missing_ok=True)  # an earlier start's, killed before its take
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(handoff))
        os.chmod(handoff, 0o666)  # connecting needs write permission on the socket, whatever the sandbox's user
        listener.listen(1)
    except BaseException:
        listener.close()
        raise
    with _lock:
        old = _handoffs.pop(name, None)
        _handoffs[name] = listener
    if old is not None:
        old.close()
    return {"network_disabled": True,
            "mounts": [Mount(target=MOUNT, source=str(directory), type="bind", read_only=True)],
            "environment": {"HARNESS_SANDBOX_HANDOFF": f"{MOUNT}/{HANDOFF}"}}


def take(name: str, timeout: float, still_starting: Callable[[], None], check_every: float = 0.25) -> str:
    """Wait for sandboxd to connect to the handoff socket, bind the sandbox's socket at the private path and hand
    it over listening; returns that path. still_starting() raises when the sandbox died (asked every
    `check_every` seconds)."""
    from harness.sandbox.service import poll_until

    directory, private = paths(name)
    with _lock:
        listener = _handoffs.pop(name)
    peer: list[socket.socket] = []

    def connected() -> bool:
        try:
            peer.append(listener.accept()[0])
            return True
        except BlockingIOError:
            return False

    served = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.setblocking(False)
        poll_until(connected, timeout, still_starting, f"sandboxd did not connect to {directory / HANDOFF} within "
                   f"{timeout:.0f}s (HARNESS_SANDBOX_TRANSPORT=tcp publishes a port instead)",
                   first=0.002, most=0.05, check_every=check_every)
        private.unlink(missing_ok=True)
        served.bind(str(private))
        os.chmod(private, 0o600)
        served.listen(BACKLOG)
        peer[0].settimeout(10)
        peer[0].sendmsg([b"\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [served.fileno()]))])
    except OSError as exc:
        raise InfraError(f"handing sandboxd its socket at {private} failed: {exc}") from exc
    finally:
        for held in (listener, served, *peer):  # sandboxd holds the served socket now; ours is a copy
            held.close()
        (directory / HANDOFF).unlink(missing_ok=True)
    return str(private)


def remove(name: str) -> None:
    """Remove the sandbox's directory and socket (and the handoff socket of a start that never took it)."""
    with _lock:
        listener = _handoffs.pop(name, None)
    if listener is not None:
        listener.close()
    try:
        directory, private = paths(name)
    except InfraError:
        return  # no private directory: no socket of ours either
    private.unlink(missing_ok=True)
    shutil.rmtree(directory, ignore_errors=True)


def sweep(names: set[str], *, older_than: float = 300) -> list[str]:
    """Remove what a killed harness left in this engine's directory (made before its create, or its teardown
    killed after the engine's removal): every entry older than `older_than` seconds that is no container's
    of `names`, the names of every harness container on this engine. Returns what it removed."""
    try:
        base = _base()
    except InfraError:
        return []
    keep, now, gone = {_key(name) for name in names}, time.time(), []
    for entry in base.iterdir():
        if entry.name.removesuffix(".sock") in keep:
            continue
        try:
            if now - entry.lstat().st_mtime < older_than:
                continue  # a start in progress
        except FileNotFoundError:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        gone.append(entry.name)
    return gone
