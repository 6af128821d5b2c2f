"""Owner tokens and who may be reaped (naming.owner_token / owner_alive, cleanup.select): a harness
on a host is judged by PID and start time, one inside a Docker container by that container's state
on the engine. Pure Python: the engine and /proc/self/mountinfo are stand-ins. (The real thing, a
containerised harness killed mid-run and reaped from the host, is tests/test_compose.py.)"""

from __future__ import annotations

import os
import socket

import pytest

from harness.sandbox.contract import Leftover
from harness.sandbox.docker import cleanup, engine, naming

CID = "4f" * 32
OTHER = "a1" * 32

CONTAINER_MOUNTINFO = f"""\
1021 868 0:118 / / rw,relatime master:409 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X
1022 1021 0:121 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1031 1021 8:1 /var/lib/docker/containers/{CID}/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/sda1 rw
1032 1021 8:1 /var/lib/docker/containers/{CID}/hostname /etc/hostname rw,relatime - ext4 /dev/sda1 rw
1033 1021 8:1 /var/lib/docker/containers/{CID}/hosts /etc/hosts rw,relatime - ext4 /dev/sda1 rw
"""
HOST_MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
25 22 0:5 / /dev rw,nosuid,relatime shared:2 - devtmpfs udev rw
"""


def test_own_container_id_reads_dockers_bind_mounts_and_nothing_else():
    assert naming.own_container_id(CONTAINER_MOUNTINFO) == CID
    assert naming.own_container_id(CONTAINER_MOUNTINFO.replace("/var/lib/docker", "/srv/docker-root")) == CID
    assert naming.own_container_id(HOST_MOUNTINFO) is None
    # A host that merely bind-mounts a container's file elsewhere is not inside that container.
    elsewhere = f"40 22 8:1 /var/lib/docker/containers/{CID}/hosts /mnt/hosts rw - ext4 /dev/sda1 rw\n"
    assert naming.own_container_id(HOST_MOUNTINFO + elsewhere) is None


@pytest.fixture
def in_container(monkeypatch):
    """This process runs in container CID, on the engine whose key is 'e1'."""
    monkeypatch.setattr(naming, "own_container_id", lambda mountinfo=None: CID)
    monkeypatch.setattr(naming, "_current_engine_key", lambda: "e1")
    monkeypatch.setattr(naming, "_identity", None)
    return monkeypatch


@pytest.fixture
def on_host(monkeypatch):
    """This process runs on a host whose engine's key is 'e1'; `states` is what the engine answers."""
    states: dict[str, dict] = {}
    monkeypatch.setattr(naming, "own_container_id", lambda mountinfo=None: None)
    monkeypatch.setattr(naming, "_current_engine_key", lambda: "e1")
    monkeypatch.setattr(engine, "container_state", lambda cid: states.get(cid, {}))
    return states


def test_host_token_unchanged_on_a_host(on_host):
    host, pid, start = naming.owner_token().rsplit(":", 2)
    assert (host, pid) == (socket.gethostname(), str(os.getpid())) and start.isdigit()
    assert naming.owner_alive(naming.owner_token()) is True


def test_in_a_container_the_token_names_the_container_and_its_engine(in_container):
    in_container.setattr(engine, "container_state", lambda cid: {"Running": True} if cid == CID else {})
    token = naming.owner_token()
    assert token.startswith(f"ctr:e1:{CID}:{os.getpid()}:")
    assert naming.owner_alive(token) is True  # seen from the same container: this PID lives
    dead = f"ctr:e1:{CID}:999999999:1"
    assert naming.owner_alive(dead) is False


def test_in_a_container_the_engine_does_not_know_the_token_says_so(in_container):
    in_container.setattr(engine, "container_state", lambda cid: {})  # a remote engine: not our container's
    assert naming.owner_token().startswith(f"ctr:-:{CID}:")


def test_from_a_container_host_owners_are_never_judged(in_container):
    # Same hostname (network_mode: host shares it), but our PIDs are another namespace's.
    assert naming.owner_alive(f"{socket.gethostname()}:999999999:1") is None
    assert naming.owner_alive(f"{socket.gethostname()}:{os.getpid()}:1") is None


@pytest.mark.parametrize("state, alive", [
    ({"Running": True, "Status": "running"}, True),
    ({"Running": True, "Paused": True, "Status": "paused"}, True),
    ({"Running": True, "Restarting": True, "Status": "restarting"}, True),
    ({"Running": False, "Status": "exited", "ExitCode": 137}, False),
    ({"Running": False, "Status": "created"}, False),
    (None, False),  # removed (docker-compose run --rm)
])
def test_from_the_host_a_container_owner_lives_as_long_as_its_container(on_host, state, alive):
    if state is not None:
        on_host[OTHER] = state
    assert naming.owner_alive(f"ctr:e1:{OTHER}:7:12345") is alive


def test_container_owners_of_other_or_unknown_engines_are_never_judged(on_host, monkeypatch):
    assert naming.owner_alive(f"ctr:e2:{OTHER}:7:12345") is None  # another engine's container
    assert naming.owner_alive(f"ctr:-:{OTHER}:7:12345") is None  # its engine did not know it
    monkeypatch.setattr(naming, "_current_engine_key", lambda: None)  # our engine does not answer
    assert naming.owner_alive(f"ctr:e1:{OTHER}:7:12345") is None


def test_an_engine_failure_while_judging_is_cannot_tell(on_host, monkeypatch):
    def broken(cid):
        raise RuntimeError("engine went away")

    monkeypatch.setattr(engine, "container_state", broken)
    assert naming.owner_alive(f"ctr:e1:{OTHER}:7:12345") is None


@pytest.mark.parametrize("bad", ["ctr:e1:notanid:7:1", "ctr:e1:" + OTHER, "ctr:e1:" + OTHER + ":7:1:extra", "", "x"])
def test_malformed_owners_are_never_judged(on_host, bad):
    on_host[OTHER] = {"Running": False, "Status": "exited"}
    assert naming.owner_alive(bad) is None


def test_select_reaps_only_owners_certainly_gone_and_asks_once_per_owner(on_host, monkeypatch):
    live, gone = "b2" * 32, "c3" * 32
    on_host[live] = {"Running": True}
    on_host[gone] = {"Running": False, "Status": "exited"}
    asked: list[str] = []
    real = engine.container_state
    monkeypatch.setattr(engine, "container_state", lambda cid: asked.append(cid) or real(cid))
    me = naming.owner_token()
    found = [
        Leftover("1", "a", "r1", f"ctr:e1:{live}:7:1", "running"),
        Leftover("2", "b", "r1", f"ctr:e1:{live}:7:1", "running"),
        Leftover("3", "c", "r2", f"ctr:e1:{gone}:7:1", "running"),
        Leftover("4", "d", "r2", f"ctr:e1:{gone}:7:1", "running"),
        Leftover("5", "e", "r3", f"ctr:e1:{'d4' * 32}:7:1", "running"),  # container removed
        Leftover("6", "f", "r4", f"ctr:e2:{gone}:7:1", "running"),  # another engine's
        Leftover("7", "g", "r5", me, "running"),  # this very process
        Leftover("8", "h", "r6", f"{socket.gethostname()}:999999999:1", "running"),  # a dead host process
        Leftover("9", "i", "r7", "other-host:1:1", "running"),
    ]
    assert [f.id for f in cleanup.select(found)] == ["3", "4", "5", "8"]
    assert sorted(asked) == sorted([live, gone, "d4" * 32])  # once per owner container
    assert cleanup.select(found, run_id="r1") == found  # an explicit run id (or --all) selects all found
