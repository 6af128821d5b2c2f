"""Containment faults (issue 9: nothing lost, nothing leaked, nobody out).

Agent code that fills the disk, floods PID 1's stdout, eats the memory, or probes the
network from a "none" sandbox: each must stay inside its sandbox, and the sandbox's
service must keep answering (or, when the agent really exhausted it, the death must be
the agent's error, not infra's).
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness import errors
from harness.sandbox.contract import SandboxSpec, parse_size
from harness.sandbox.docker import engine, naming
from harness.sandbox.swarm.networks import BRIDGE as SWARM_BRIDGE
from tests.helpers.locks import machine_lock
from tests.helpers.wait import steady

pytestmark = pytest.mark.docker

DOCKER_ROOT = "/var/lib/docker"


def spec(image, run_id, instance="i", **kw) -> SandboxSpec:
    return SandboxSpec(image=image, run_id=run_id, instance_id=instance, **kw)


def leaked(provider, run_id) -> int:
    return len(provider.find(run_id))


# ------------------------------------------------------------------ 1. disk
FILL = ("head -c 3G /dev/zero > /workspace/big; echo ws=$?; "
        "head -c 3G /dev/zero > /tmp/big2; echo tmp=$?; "
        "head -c 3G /dev/zero > $HOME/big3; echo home=$?; "
        "head -c 3G /dev/zero > /var/tmp/big4; echo vartmp=$?; "
        "du -scb /workspace/big /tmp/big2 $HOME/big3 /var/tmp/big4 2>/dev/null | tail -n1")


def test_a_disk_filler_ends_with_enospc_and_the_host_keeps_its_space(provider, image, run_id, reliability):
    t0 = time.monotonic()
    limit = "512m"
    local = engine.engine_is_local() and os.path.isdir(DOCKER_ROOT)
    with provider.open(spec(image, run_id, "filler", disk=limit)) as sb:
        with machine_lock("disk"):  # no image load or build of another test shrinks the free space meanwhile
            free_before = shutil.disk_usage(DOCKER_ROOT).free if local else None
            result = sb.shell(FILL, timeout=300)
            free_after = shutil.disk_usage(DOCKER_ROOT).free if local else None
        lines = result.stdout.splitlines()
        codes = dict(line.split("=") for line in lines if "=" in line)
        written = int(lines[-1].split()[0]) if lines and lines[-1].split()[0].isdigit() else -1
        # Every write stopped: no space left, or a read-only place.
        assert all(code != "0" for code in codes.values()), (codes, result.stderr)
        assert "No space left on device" in result.stderr, result.stderr
        assert 0 <= written <= parse_size(limit), written
        if local:
            dropped = free_before - free_after
            # Other processes on the machine write too: allow some slack above the limit.
            assert dropped <= parse_size(limit) + (256 << 20), f"host free space dropped by {dropped >> 20} MiB"
        assert sb.shell("echo still serving").stdout == "still serving\n"
        assert sb.shell("rm -f /workspace/big && echo ok > /workspace/after && cat /workspace/after").stdout == "ok\n"
    reliability.record("disk filler (3 GB x 4 places, --disk 512m)",
                       f"ENOSPC after {written >> 20} MiB; host free space "
                       + (f"-{max(0, free_before - free_after) >> 20} MiB" if local else "not measured")
                       + "; sandbox kept serving", leaked=leaked(provider, run_id), started=t0)


def test_the_disk_backend_follows_the_storage_driver(monkeypatch):
    """Quota where the driver can enforce one; else a read-only root and tmpfs adding up to the limit,
    with the memory limit raised by the disk (tmpfs is RAM charged to the container)."""
    from harness.sandbox.docker import storage

    assert storage.quota_candidate("overlay2", "xfs") and storage.quota_candidate("btrfs", "")
    assert storage.quota_candidate("zfs", "") and storage.quota_candidate("devicemapper", "")
    assert not storage.quota_candidate("overlay2", "extfs") and not storage.quota_candidate("vfs", "")
    sb = SandboxSpec(image="img", run_id="r", instance_id="i", memory="1g", disk="2g")
    monkeypatch.setattr(storage, "backend", lambda image, disk: storage.Backend("quota", "btrfs"))
    quota = storage.create_options(sb)
    assert quota["storage_opt"] == {"size": str(2 << 30)} and quota["mem_limit"] == 1 << 30
    assert "tmpfs" not in quota and not quota.get("read_only")
    monkeypatch.setattr(storage, "backend", lambda image, disk: storage.Backend("tmpfs", "overlay2 on extfs"))
    tmpfs = storage.create_options(sb)
    assert tmpfs["read_only"] and "storage_opt" not in tmpfs
    assert tmpfs["mem_limit"] == tmpfs["memswap_limit"] == (1 << 30) + (2 << 30)
    assert set(tmpfs["tmpfs"]) == {"/workspace", "/tmp", "/home/agent"}
    assert sum(storage.tmpfs_sizes(2 << 30).values()) == 2 << 30
    for options in (quota, tmpfs):
        assert options["log_config"]["config"] == {"max-size": "2m", "max-file": "2"}


def test_a_bad_disk_is_refused_before_any_container(tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    for bad in ("1k", "lots"):
        out = CliRunner().invoke(app, ["run", "--dataset", str(tmp_path / "none.jsonl"), "--model", "replay",
                                       "--output-dir", str(tmp_path / "out"), "--disk", bad])
        assert out.exit_code == 2 and "--disk" in out.output and "disk must be a size" in out.output, out.output
    with pytest.raises(ValueError):
        SandboxSpec(image="i", run_id="r", instance_id="i", disk="1m")
    assert SandboxSpec(image="i", run_id="r", instance_id="i").disk == "2g"


def _log_bytes(container_id: str) -> int:
    path = engine.client().api.inspect_container(container_id)["LogPath"]
    return sum(os.path.getsize(p) for p in glob.glob(path + "*"))


def test_flooding_pid1_stdout_keeps_the_engine_log_capped(provider, image, run_id, reliability):
    if not engine.engine_is_local():
        pytest.skip("the log file is on a remote engine's disk")
    t0 = time.monotonic()
    with provider.open(spec(image, run_id, "logflood")) as sb:
        # 200 MB in 1 KB lines into sandboxd's own stdout (the pipe the engine logs). Since PID 1 is not
        # dumpable (sandboxd._seal_memory) agent code cannot open it at all; the cap still holds behind that.
        result = sb.shell("python3 -c \"import sys; line = 'x' * 1023 + chr(10)\n"
                          "with open('/proc/1/fd/1', 'w') as out:\n"
                          "    [out.write(line) for _ in range(200 * 1024)]\"", timeout=300)
        refused = result.exit_code != 0 and "PermissionError" in result.stderr
        assert result.exit_code == 0 or refused, result.stderr
        # The engine's logger may still be writing what it read: its size once that has stopped.
        size = steady(lambda: _log_bytes(sb.id), 1.0, 60, "the container's engine log")
        # The cap is 2 files of 2 MB (storage.LOG_CONFIG); a rotation may overshoot by a line or so.
        assert size <= 5 << 20, f"the container's log holds {size >> 20} MiB"
        assert sb.shell("echo still serving").stdout == "still serving\n"
    reliability.record("200 MB written to PID 1's stdout",
                       ("refused (PID 1's descriptors are not agent code's); " if refused else "")
                       + f"engine log {size / (1 << 20):.1f} MiB (capped)", leaked=leaked(provider, run_id), started=t0)


# ------------------------------------------------------------------ 2. memory
def test_a_memory_hog_is_killed_and_the_service_survives(provider, image, run_id, reliability):
    t0 = time.monotonic()
    with provider.open(spec(image, run_id, "hog", memory="256m", disk="64m")) as sb:
        result = sb.python("b = bytearray(2 << 30)\nprint('survived')", timeout=120)
        assert result.exit_code in (137, 1) and "survived" not in result.stdout, result
        assert result.exit_code == 137 or "MemoryError" in result.stderr
        assert sb.shell("echo still serving").stdout == "still serving\n"
    reliability.record("one process allocating 2 GB (--memory 256m)", f"the process ended ({result.exit_code}); "
                       "sandbox kept serving", leaked=leaked(provider, run_id), started=t0)


def test_many_small_hogs_are_killed_before_the_service(provider, image, run_id, reliability):
    """Each hog is smaller than sandboxd, so by size alone the kernel would kill sandboxd first."""
    t0 = time.monotonic()
    with provider.open(spec(image, run_id, "hogs", memory="256m", disk="64m")) as sb:
        rss = int(sb.shell("awk '/VmRSS/ {print $2}' /proc/1/status").stdout)
        hog = "import time; b = bytearray(4 << 20); time.sleep(4)"
        result = sb.shell(f"for i in $(seq 60); do (python3 -c '{hog}'; echo $? >> /tmp/hog-codes) & done; wait",
                          timeout=120)
        assert not result.timed_out
        codes = sb.shell("cat /tmp/hog-codes").stdout.split()
        killed = codes.count("137")
        assert killed >= 1, codes  # the kernel did step in (and took hogs, see below)
        assert sb.shell("echo still serving").stdout == "still serving\n"
        assert sb.shell("ps -o pid=,args= -p 1").stdout.split()[0] == "1"
        adj = sb.shell("cat /proc/self/oom_score_adj; cat /proc/1/oom_score_adj").stdout.split()
        assert int(adj[0]) > int(adj[1]), adj  # commands are the OOM killer's first choice
    reliability.record(f"60 processes of ~14 MB each under --memory 256m (sandboxd ~{rss >> 10} MB)",
                       f"{killed} hogs OOM-killed, sandboxd kept serving", leaked=leaked(provider, run_id), started=t0)


def test_a_sandbox_killed_for_memory_is_the_agents_error(provider, image, run_id, reliability):
    """A container the kernel OOM-killed (State.OOMKilled) is reported as exhausted: kind agent, no retry."""
    t0 = time.monotonic()
    api = engine.client().api
    made = api.create_container(image, entrypoint=["python3", "-c", "b = bytearray(1 << 30)"],
                                labels=naming.labels(run_id, "oom", 1),
                                host_config=api.create_host_config(mem_limit="32m", memswap_limit="32m",
                                                                   cap_drop=["ALL"]))
    api.start(made["Id"])
    api.wait(made["Id"], timeout=60)
    assert engine.container_state(made["Id"]).get("OOMKilled")
    with pytest.raises(errors.SandboxDied) as caught:
        engine.raise_if_dead(made["Id"], "oom-probe")
    exhausted = getattr(errors, "SandboxExhausted", None)
    assert exhausted is not None and isinstance(caught.value, exhausted), caught.value
    assert caught.value.kind == "agent" and caught.value.retryable is False
    assert caught.value.oom_killed is True
    # Out of memory before any agent code ran (sandboxd starting): not the agent's doing.
    with pytest.raises(errors.SandboxDied) as starting:
        engine.raise_if_dead(made["Id"], "oom-probe", agent_ran=False)
    assert starting.value.kind == "infra" and "while starting" in str(starting.value)
    # A sandbox that is simply gone stays infra (retried).
    api.remove_container(made["Id"], force=True)
    with pytest.raises(errors.SandboxDied) as gone:
        engine.raise_if_dead(made["Id"], "oom-probe")
    assert gone.value.kind == "infra" and gone.value.retryable and not gone.value.oom_killed
    reliability.record("sandbox container OOM-killed", "SandboxExhausted: kind agent, not retried",
                       leaked=leaked(provider, run_id), started=t0)


# ------------------------------------------------------------------ 3. network "none"
def _networks(container_id: str) -> dict:
    return engine.client().api.inspect_container(container_id)["NetworkSettings"]["Networks"]


class _HostServer:
    """A TCP server on all host addresses that answers 'hello' and counts connections."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.sendall(b"hello")
            conn.close()

    def close(self):
        self.sock.close()


PROBE = """
import socket, sys
for target in sys.argv[1:]:
    kind, rest = target.split(':', 1)
    if kind == 'dns':
        try:
            print('resolved', socket.gethostbyname(rest))
        except OSError as exc:
            print('unresolved', type(exc).__name__)
        continue
    host, port = rest.rsplit(':', 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3) as s:
            print('open', s.recv(5).decode() or '-')
    except OSError as exc:
        print('blocked', type(exc).__name__)
"""


def test_network_none_reaches_neither_the_host_nor_other_sandboxes_nor_their_names(provider, image, run_id,
                                                                                   reliability, tcp_transport):
    """On the `harness-none` bridge, where the socket transport cannot be used (a sandbox with no network at
    all: tests/test_socket_transport.py)."""
    t0 = time.monotonic()
    server = _HostServer()
    try:
        with provider.open(spec(image, run_id, "probe")) as sb, provider.open(spec(image, run_id, "other")) as other:
            mine = next(iter(_networks(sb.id).values()))
            theirs = next(iter(_networks(other.id).values()))
            docker_name = engine.client().api.inspect_container(other.id)["Name"].lstrip("/")
            targets = [f"tcp:{mine['Gateway']}:{server.port}",  # a host service on 0.0.0.0, via the gateway
                       f"tcp:{theirs['IPAddress']}:8765",  # another sandbox's service
                       f"dns:{docker_name}", f"dns:{other.name}"]  # another sandbox's names
            result = sb.exec(["python3", "-c", PROBE, *targets], timeout=60)
            lines = result.stdout.splitlines()
            assert len(lines) == 4, result
            if _iptables_usable():  # otherwise the one warning says so (networks.py)
                assert lines[0].startswith("blocked"), f"host service via the gateway: {lines[0]}"
                assert server.accepted == 0
            assert lines[1].startswith("blocked"), f"other sandbox: {lines[1]}"
            assert lines[2].startswith("unresolved"), f"other sandbox's container name: {lines[2]}"
            assert lines[3].startswith("unresolved"), f"other sandbox's harness name: {lines[3]}"
            # The harness's own service port still works, both ways.
            assert sb.shell("echo served").stdout == "served\n"
            assert other.shell("echo served").stdout == "served\n"
    finally:
        server.close()
    reliability.record("network none: host service, other sandbox, other sandbox's name",
                       "all unreachable / unresolved; service port works", leaked=leaked(provider, run_id),
                       started=t0)


def _iptables_usable() -> bool:
    return os.geteuid() == 0 and shutil.which("iptables") is not None and engine.engine_is_local()


def test_network_none_packets_never_leave_the_bridge(provider, image, run_id, reliability, tcp_transport):
    """Nothing from the isolated bridge is forwarded anywhere (without NAT it would leave with the
    sandbox's own address) and nothing new reaches the host; replies of the published port still flow."""
    if not _iptables_usable():
        pytest.skip("needs root, iptables and a local engine")
    from harness.sandbox.docker import networks

    t0 = time.monotonic()
    with provider.open(spec(image, run_id, "leave")) as sb:
        bridge = networks.ISOLATED_BRIDGE
        assert networks.firewall_problem() is None
        assert networks.apply_firewall() is None  # again: idempotent, nothing added twice
        dump = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True, check=True).stdout
        # One jump into our chain from INPUT and one from DOCKER-USER (or FORWARD), each only for our bridge;
        # any other jump is a running website's, from INPUT for its own bridge (networks.seal_site), or the
        # swarm provider's isolated bridge's, while a swarm test runs beside this one (tests/swarm).
        jumps = [line for line in dump.splitlines() if line.endswith(f"-j {networks.CHAIN}")]
        mine = [line for line in jumps if f" -i {bridge} " in line]
        assert sorted(line.split()[1] for line in mine) in (["DOCKER-USER", "INPUT"], ["FORWARD", "INPUT"]), dump
        assert all(line == f"-A {line.split()[1]} -i {bridge} -j {networks.CHAIN}" for line in mine), mine
        sites = [line for line in jumps if line not in mine and f" -i {SWARM_BRIDGE} " not in line]
        assert all(line.startswith(f"-A INPUT -i {networks.SITE_BRIDGE_PREFIX}") for line in sites), sites
        # A documentation address (TEST-NET-3): refused at the bridge, at once, not left to time out (a dropped
        # packet ends in the probe's 3 s connect timeout: TimeoutError).
        result = sb.exec(["python3", "-c", PROBE, "tcp:203.0.113.7:80"], timeout=60)
        assert result.stdout.startswith("blocked") and "TimeoutError" not in result.stdout, result
        assert sb.shell("echo served").stdout == "served\n"
    reliability.record("network none: packet to the outside", "refused at the bridge",
                       leaked=leaked(provider, run_id), started=t0)


def test_without_firewall_rules_the_harness_warns_once(provider, image, monkeypatch, caplog, tcp_transport):
    """Not root (or no iptables, or a remote engine): one warning, logged and given to the provider's
    `prepare` log (which `harness run` prints once it has instances to run), saying what stays reachable."""
    from harness.sandbox.docker import networks

    monkeypatch.setattr(networks, "_ready", set())
    monkeypatch.setattr(networks, "_firewall", {})
    monkeypatch.setattr(networks.os, "geteuid", lambda: 1000)
    printed: list[str] = []
    with caplog.at_level("WARNING", logger=networks.__name__):
        provider.preflight(network="none", log=printed.append)
        assert not [m for m in printed if "not sealed" in m]  # a run with nothing to do makes no network
        provider.prepare(network="none", log=printed.append)
        provider.prepare(network="none", log=printed.append)
    warnings = [m for m in printed if "not sealed" in m]
    assert len(warnings) == 1 and "not running as root" in warnings[0] and "\n" not in warnings[0]
    assert sum("not sealed" in r.getMessage() for r in caplog.records) == 1
    assert networks.firewall_problem() == "not running as root"


# ------------------------------------------------------------------ the website's network (issue 18 item 4)
SMOKE_SITE = Path(__file__).resolve().parents[2] / "datasets" / "gaia-smoke" / "website"
FETCH_SITE = ("import urllib.request as u; "
              "print(u.urlopen('http://shop.gaia.test/', timeout=20).status)")


def _rules_naming(device: str) -> list[str]:
    dump = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True, check=True).stdout
    return [line for line in dump.splitlines() if f" {device} " in f"{line} "]


def _site_bridge(policy: str) -> str:
    """The device of a site network's bridge: our name option, else the engine's default name."""
    net = engine.client().api.inspect_network(policy.split(":", 1)[1])
    return (net.get("Options") or {}).get("com.docker.network.bridge.name") or f"br-{net['Id'][:12]}"


def test_website_sandboxes_reach_the_site_but_not_the_host(provider, image, run_id, reliability):
    """`--website`: agent code on the site's network reached a host service on 0.0.0.0 through that
    network's gateway (the rules covered the none bridge only). Now refused there, at once, while the
    site answers; the rule goes with the network, and the none bridge's rules stay as they were."""
    if not _iptables_usable():
        pytest.skip("needs root, iptables and a local engine")
    from harness.sandbox.docker import networks

    t0 = time.monotonic()
    server = _HostServer()
    none_jumps = [line for line in _rules_naming(networks.ISOLATED_BRIDGE) if networks.CHAIN in line]
    try:
        with provider.website(SMOKE_SITE, image, run_id) as policy, \
                provider.open(spec(image, run_id, "site-probe", network=policy)) as sb:
            site_net = policy.split(":", 1)[1]
            gateway = _networks(sb.id)[site_net]["Gateway"]
            bridge = _site_bridge(policy)
            started = time.monotonic()
            probe = sb.exec(["python3", "-c", PROBE, f"tcp:{gateway}:{server.port}"], timeout=60)
            refused_in = time.monotonic() - started
            site = sb.exec(["python3", "-c", FETCH_SITE], timeout=60)
            ours = [line for line in _rules_naming(bridge) if networks.CHAIN in line]
        assert probe.stdout.startswith("blocked"), f"host service via the site's gateway {gateway}: {probe}"
        assert ours == [f"-A INPUT -i {bridge} -j {networks.CHAIN}"], ours
        assert server.accepted == 0
        assert refused_in < 3, refused_in  # refused, not left to time out
        assert site.stdout.strip() == "200", site
        assert _rules_naming(bridge) == [], "a firewall rule outlived the site's network"
        assert [line for line in _rules_naming(networks.ISOLATED_BRIDGE) if networks.CHAIN in line] == none_jumps
        assert not [line for line in _rules_naming("docker0") if networks.CHAIN in line]
    finally:
        server.close()
    reliability.record("--website: a host service on 0.0.0.0 via the site network's gateway",
                       f"refused in {refused_in:.1f} s; the site answered; rule removed with the network",
                       leaked=leaked(provider, run_id), started=t0)


def test_a_killed_runs_site_rule_goes_with_its_network_at_cleanup(provider, image, run_id):
    """A harness killed with its site up leaves the network and its rule; the cleanup that removes the
    network removes the rule too."""
    if not _iptables_usable():
        pytest.skip("needs root, iptables and a local engine")
    from harness.sandbox.docker import networks

    site = provider.website(SMOKE_SITE, image, run_id)
    policy = site.__enter__()  # and never left: as a killed harness would
    bridge = _site_bridge(policy)
    assert [line for line in _rules_naming(bridge) if networks.CHAIN in line], "the site's network is not sealed"
    removed = provider.cleanup(run_id=run_id)
    assert policy.split(":", 1)[1] in {item.name for item in removed}
    assert _rules_naming(bridge) == []


def test_an_internal_network_the_harness_did_not_make_is_warned_about(provider, image, caplog):
    """internal:NAME of the user's own network: never given rules, and one warning names its gateway."""
    name = f"harness-test-user-{secrets.token_hex(3)}"
    api = engine.client().api
    api.create_network(name, driver="bridge", internal=True)
    printed: list[str] = []
    try:
        provider.preflight(network=f"internal:{name}", log=printed.append)
        gateway = api.inspect_network(name)["IPAM"]["Config"][0]["Gateway"]
    finally:
        api.remove_network(name)
    warnings = [m for m in printed if f"internal:{name} is not sealed" in m]
    assert len(warnings) == 1 and gateway in warnings[0] and "\n" not in warnings[0], printed
    assert "routes to" not in warnings[0]  # internal: nothing beyond the host
