"""Two harness processes that find the firewall chain incomplete at once (harness/sandbox/docker/networks.py):
each used to flush HARNESS-ISOLATED and append its rules, so for a moment the chain was empty (every sandbox on
the bridge reached the host's services: errno 111 where the firewall's 113 was due, seen in
tests/swarm/test_swarm.py::test_network_policies under load) or held its rules twice, which the next process took
for incomplete and flushed again. Now every change is one transaction (iptables-restore --noflush) under one lock.

The race is run on a chain of the test's own name (never the real one, which other runs on this host rely on):
processes started together, released at once, while this process samples the chain as fast as iptables answers."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import threading

import pytest

PROCESSES = 8
# One harness process's check-and-change, as apply_firewall makes it, on the chain named in argv[1]: it says it is
# ready, waits for the word, then goes.
ENSURE = """
import contextlib, sys
from harness.sandbox.docker import networks
networks.CHAIN = sys.argv[1]
print("ready", flush=True)
sys.stdin.readline()
with getattr(networks, "_firewall_lock", contextlib.nullcontext)():
    networks._ensure_chain()
"""


def iptables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["iptables", "-w", "10", *args], capture_output=True, text=True, timeout=60)


def rules(chain: str) -> tuple[str, ...]:
    return tuple(line for line in iptables("-S", chain).stdout.splitlines() if line.startswith("-A "))


@pytest.fixture
def chain():
    if os.geteuid() != 0 or shutil.which("iptables") is None or shutil.which("iptables-restore") is None:
        pytest.skip("needs root, iptables and iptables-restore")
    name = f"HARNESS-T{secrets.token_hex(3).upper()}"
    assert iptables("-N", name).returncode == 0
    try:
        yield name
    finally:
        iptables("-F", name)
        iptables("-X", name)


def test_concurrent_ensures_never_leave_the_chain_empty_or_doubled(chain):
    from harness.sandbox.docker import networks

    for rule in networks._CHAIN_RULES * 2:  # what a past race left: each rule twice, "incomplete" to every process
        assert iptables("-A", chain, *rule).returncode == 0
    planted = rules(chain)
    assert len(planted) == 4
    procs = [subprocess.Popen([sys.executable, "-c", ENSURE, chain], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(PROCESSES)]
    samples: list[tuple[str, ...]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append(rules(chain))

    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n", proc.communicate()[1][-2000:]
        sampler = threading.Thread(target=sample)
        sampler.start()
        for proc in procs:  # released together
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-2000:]
    finally:
        done.set()
        for proc in procs:
            proc.kill()
    sampler.join()
    final = rules(chain)
    assert len(final) == 2 and "--ctstate RELATED,ESTABLISHED -j RETURN" in final[0], final
    assert final[1].endswith("-j REJECT --reject-with icmp-admin-prohibited") or final[1].endswith("-j DROP"), final
    samples.append(final)
    seen = [s for n, s in enumerate(samples) if n == 0 or s != samples[n - 1]]  # each state once, in order
    assert seen in ([planted, final], [final]), (len(samples), seen)
