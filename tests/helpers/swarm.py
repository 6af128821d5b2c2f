"""A single-node swarm on the host engine for tests: made only when the engine is in none,
and undone to leave the engine as found.

`single_node_swarm()` runs `docker swarm init --advertise-addr 127.0.0.1` when the engine is
inactive, and at the end (only then) `docker swarm leave --force` and removes the local
networks the swarm and the harness made there (docker_gwbridge, the swarm provider's
config-only network) if they were not there before, and the firewall jumps for the provider's
bridge that were not there before either (once that bridge is gone: remove_firewall_jumps).
An engine already in a swarm is used as it is (a worker: the test is skipped).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.helpers.locks import machine_lock

LOCAL_NETWORKS = ("docker_gwbridge", "harness-swarm-none-config")
# Set by a swarm test for a pytest it starts under its own swarm lock (single_node_swarm).
HELD_ENV = "TESTS_SWARM_LOCK_HELD"
BRIDGE_GONE_S = 30  # the swarm's bridge goes ~2 s after its last task (measured)
SWARM_WAIT_S = 1800  # the host engine is in one swarm at a time: another suite's swarm tests may hold it that long


def docker(*args: str, check: bool = True, timeout: float = 60, host: str | None = None) -> str:
    command = ["docker", *(["-H", host] if host else []), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout


def swarm_state(host: str | None = None) -> dict:
    return json.loads(docker("info", "--format", "{{json .Swarm}}", host=host))


def network_names(host: str | None = None) -> set[str]:
    return set(docker("network", "ls", "--format", "{{.Name}}", host=host).split())


def wait_swarm_network_gone(host: str | None = None, timeout: float = 60) -> None:
    """After a leave: the engine lists its copy of the swarm's isolated network for a few seconds
    more (tests/swarm/test_rejoin.py); the next module's swarm must not start beside it."""
    from harness.sandbox.swarm.networks import ISOLATED

    deadline = time.monotonic() + timeout
    while ISOLATED in network_names(host) and time.monotonic() < deadline:
        time.sleep(0.2)


def firewall_jumps() -> set[str]:
    """The jumps into the harness's chain for the swarm provider's bridge (`iptables -S` lines), when root."""
    from harness.sandbox.docker.networks import CHAIN
    from harness.sandbox.swarm.networks import BRIDGE

    if os.geteuid() != 0 or shutil.which("iptables") is None:
        return set()
    return {line for chain in ("INPUT", "DOCKER-USER", "FORWARD")
            for line in subprocess.run(["iptables", "-w", "10", "-S", chain], capture_output=True, text=True,
                                       timeout=60).stdout.splitlines()
            if line.endswith(f" -i {BRIDGE} -j {CHAIN}")}


def remove_firewall_jumps(found: set[str]) -> None:
    """After the swarm is left: delete the jumps for the swarm provider's bridge that were not there when the swarm
    was made (`found`), under the harness's firewall lock, and only once the bridge is gone from this host (nothing
    can rely on them then: a harness process applies them, under that lock, only for a swarm's bridge). A bridge
    still there after BRIDGE_GONE_S keeps its jumps: they name that bridge alone."""
    from harness.sandbox.docker.networks import _firewall_lock
    from harness.sandbox.swarm.networks import BRIDGE

    deadline = time.monotonic() + BRIDGE_GONE_S
    while os.path.exists(f"/sys/class/net/{BRIDGE}"):
        if time.monotonic() > deadline:
            return
        time.sleep(0.2)
    with _firewall_lock():
        if os.path.exists(f"/sys/class/net/{BRIDGE}") or swarm_state().get("LocalNodeState") != "inactive":
            return
        for line in firewall_jumps() - found:
            subprocess.run(["iptables", "-w", "10", "-D", *line.split()[1:]], capture_output=True, timeout=60)


@contextmanager
def single_node_swarm() -> Iterator[bool]:
    """Yields whether this call made the swarm (and so will undo it). Holds the machine's swarm lock
    meanwhile: another test process (an xdist worker, another checkout's suite) waits for it. A pytest
    that a swarm test starts (the conformance suite on swarm) runs under its parent's lock: waiting for
    it there would wait for the parent, which waits for the child (HELD_ENV says so)."""
    if os.environ.get(HELD_ENV) == "1":
        yield from _single_node_swarm()
        return
    with machine_lock("swarm", timeout=SWARM_WAIT_S):
        yield from _single_node_swarm()


def _single_node_swarm() -> Iterator[bool]:
    import pytest

    state = swarm_state()
    if state.get("LocalNodeState") == "active":
        if not state.get("ControlAvailable"):
            pytest.skip("the host engine is a swarm worker")
        yield False
        return
    before, jumps = network_names(), firewall_jumps()
    docker("swarm", "init", "--advertise-addr", "127.0.0.1")
    try:
        yield True
    finally:
        docker("swarm", "leave", "--force", check=False)
        wait_swarm_network_gone()
        for name in LOCAL_NETWORKS:
            if name not in before:
                for _ in range(20):  # the engine may still hold it for a moment after leaving
                    if name not in network_names() or not docker("network", "rm", name, check=False) == "":
                        break
                    time.sleep(0.5)
        remove_firewall_jumps(jumps)
        from harness.sandbox.swarm import networks

        networks._ready = False  # this process made the network of a swarm that is gone
        from harness.sandbox.swarm import volumes

        volumes._local.clear()


def wait_nodes_ready(count: int, timeout: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        nodes = [json.loads(line) for line in docker("node", "ls", "--format", "{{json .}}").splitlines()]
        if sum(n.get("Status") == "Ready" for n in nodes) >= count or time.monotonic() > deadline:
            return nodes
        time.sleep(0.5)


@contextmanager
def two_node_swarm(worker, image: str) -> Iterator[dict]:
    """The host engine as manager (advertising on the host end of `worker`'s veth) and `worker`
    (a started tests.helpers.engines.SecondEngine) joined, with the sandbox image and the swarm
    provider's config-only network on it. Yields {"manager": node id, "worker": node id}.
    Teardown (platform notes): worker leaves, manager leaves --force, then the local networks
    made on each engine are removed."""
    with machine_lock("swarm", timeout=SWARM_WAIT_S):
        yield from _two_node_swarm(worker, image)


def _two_node_swarm(worker, image: str) -> Iterator[dict]:
    import pytest

    from harness.sandbox.swarm import networks

    if swarm_state().get("LocalNodeState") != "inactive":
        pytest.skip("the host engine is already in a swarm")
    before, jumps = network_names(), firewall_jumps()
    # The worker's engine is the tests' own (persistent data root): sandboxes of a session that
    # stopped it mid-run are still recorded there; remove them (harness labels only).
    stale = worker.docker("ps", "-aq", "--filter", "label=harness.managed=1").stdout.split()
    if stale:
        worker.docker("rm", "-f", "-v", *stale)
    worker.docker("volume", "prune", "-f", "--filter", "label=harness.managed=1")
    worker_before = network_names(worker.unix_url)
    worker.load_image(image)
    docker("swarm", "init", "--advertise-addr", worker.host_addr, "--listen-addr", f"{worker.host_addr}:2377")
    try:
        token = docker("swarm", "join-token", "-q", "worker").strip()
        client = worker.client()
        try:
            networks.ensure_node_config(client.api)
        finally:
            client.close()
        worker.docker("swarm", "join", "--advertise-addr", worker.addr, "--token", token,
                      f"{worker.host_addr}:2377")
        nodes = wait_nodes_ready(2)
        ids = {"manager": swarm_state()["NodeID"], "worker": swarm_state(worker.unix_url)["NodeID"]}
        assert len(nodes) == 2, nodes
        yield ids
    finally:
        worker.docker("swarm", "leave", "--force", check=False)
        docker("swarm", "leave", "--force", check=False)
        for host, known in ((None, before), (worker.unix_url, worker_before)):
            if host is not None and worker.docker("info", check=False, timeout=10).returncode != 0:
                continue  # the worker's engine was stopped (a test of a node going down)
            wait_swarm_network_gone(host)
            for name in LOCAL_NETWORKS:
                if name not in known:
                    for _ in range(20):
                        if name not in network_names(host) or docker("network", "rm", name, check=False, host=host):
                            break
                        time.sleep(0.5)
        remove_firewall_jumps(jumps)
        networks._ready = False
        from harness.sandbox.swarm import volumes

        volumes._local.clear()
