"""The swarm provider on a real single-node swarm (tests/swarm/conftest.py): what the
conformance suite does not see (services, tasks, labels, limits, placement errors, network
policies, the CLI's cleanup), and the conformance suite itself run for swarm."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import docker.errors
import pytest

from harness.errors import InfraError, InputError, SandboxDied
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker import engine, naming
from harness.sandbox.swarm import cluster, networks, nodecheck, tasks
from tests.helpers.swarm import HELD_ENV

pytestmark = pytest.mark.docker
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def task_container(sandbox) -> dict:
    task = tasks.current(sandbox.id)
    return engine.client().api.inspect_container(task["Status"]["ContainerStatus"]["ContainerID"])


def test_a_sandbox_is_a_one_replica_service_with_labels_limits_and_a_host_mode_port(provider, image, run_id):
    spec = SandboxSpec(image=image, run_id=run_id, instance_id="shape", cpus=0.5, memory="256m", disk="128m",
                       pids=100)
    with provider.open(spec) as sb:
        service = engine.client().api.inspect_service(sb.id)
        want = {key: value for key, value in naming.labels(run_id, "shape", 1).items()
                if key not in (naming.LABEL_CREATED,)}
        labels = service["Spec"]["Labels"]
        assert want.items() <= labels.items() and labels[naming.LABEL_NAME] == sb.name
        assert service["Spec"]["Mode"] == {"Replicated": {"Replicas": 1}}
        assert service["Spec"]["TaskTemplate"]["RestartPolicy"]["Condition"] == "none"
        assert service["Spec"]["EndpointSpec"]["Ports"][0]["PublishMode"] == "host"
        reservations = service["Spec"]["TaskTemplate"]["Resources"]["Reservations"]
        assert reservations == {"NanoCPUs": 500_000_000, "MemoryBytes": 256 << 20}
        container = task_container(sb)
        assert want.items() <= container["Config"]["Labels"].items()
        assert container["Config"]["Labels"][naming.LABEL_NAME] == sb.name
        host = container["HostConfig"]
        assert host["PidsLimit"] == 100 and host["NanoCpus"] == 500_000_000
        assert host["Memory"] == (256 + 128) << 20  # memory + disk (the tmpfs pages count)
        assert host["CapDrop"] == ["ALL"] and host["ReadonlyRootfs"] is True
        assert "HARNESS_SANDBOX_TOKEN=" + sb.handle().token in container["Config"]["Env"]
        # The address: the node's Status.Addr and the task's published port.
        node_id = tasks.current(sb.id)["NodeID"]
        assert (sb.handle().host, sb.handle().port) == (cluster.node_addr(node_id),
                                                        tasks.published_port(tasks.current(sb.id)))
        # Writable places: sized tmpfs, owned by the agent, executable; the rest read-only.
        out = sb.shell("printf '#!/bin/sh\\necho ran\\n' > /workspace/t && chmod +x /workspace/t && /workspace/t; "
                       "stat -c %U /workspace; df -k /workspace | tail -1; touch /etc/x 2>&1; "
                       "head -c 100M /dev/zero > /workspace/big; echo $?")
        lines = out.stdout.splitlines()
        assert lines[:2] == ["ran", "agent"], out
        assert int(lines[2].split()[1]) == 64 * 1024  # half of disk
        assert "Read-only file system" in lines[3] and lines[-1] != "0"  # ENOSPC beyond the size
        assert "No space left" in out.stderr
    assert provider.find(run_id) == []


def test_a_task_whose_container_is_killed_is_sandbox_died(provider, image, run_id):
    sb = provider.start(SandboxSpec(image=image, run_id=run_id, instance_id="killed"))
    try:
        assert sb.shell("echo up").stdout == "up\n"
        engine.client().api.kill(task_container(sb)["Id"])
        with pytest.raises(SandboxDied, match="died: task (failed|shutdown|complete)"):
            sb.shell("echo gone")
    finally:
        provider.teardown(sb)
    assert provider.find(run_id) == []


def test_a_task_rejected_on_its_node_is_an_infra_error_naming_node_and_reason(provider, image, run_id):
    missing = "harness-sandbox:no-such-tag-for-swarm-test"
    node = cluster.node_name(cluster.nodes()[0])
    t0 = time.monotonic()
    with pytest.raises(InfraError) as err:
        provider.start(SandboxSpec(image=missing, run_id=run_id, instance_id="rejected"))
    assert f"on node {node}" in str(err.value) and "No such image" in str(err.value), err.value
    assert not isinstance(err.value, SandboxDied)
    assert provider.find(run_id) == []  # nothing left behind
    # Preflight's check of every node says the same before any instance starts: a node not set up is the user's
    # to fix (InputError, exit 2), with the command that loads the image.
    with pytest.raises(InputError) as err:
        nodecheck.check_nodes(missing, "none", timeout=60)
    assert f"{node}: task rejected" in str(err.value) and "No such image" in str(err.value)
    assert f"docker save {missing} | docker -H NODE load" in str(err.value)
    assert time.monotonic() - t0 < 60
    assert provider.find(nodecheck.RUN_ID) == []


def test_preflight_checks_every_node_quickly(provider, image):
    t0 = time.monotonic()
    spent = nodecheck.check_nodes(image, "none", timeout=60)
    assert spent < 10 and time.monotonic() - t0 < 10
    assert provider.find(nodecheck.RUN_ID) == []


def test_network_policies(provider, image, run_id):
    api = engine.client().api
    local = f"harness-test-local-{run_id}"
    api.create_network(local, driver="bridge", internal=True, labels={"harness.managed": "1"})
    try:
        before = provider.find()
        with pytest.raises(InputError, match="swarm-scoped networks only"):
            provider.preflight(network=f"internal:{local}", log=lambda m: None)
        with pytest.raises(InputError, match="no Docker network"):
            provider.preflight(network="internal:harness-no-such-network", log=lambda m: None)
        assert not provider.capabilities.website  # --website: refused by the run's preflight (runner/preflight.py)
        assert provider.find() == before  # refused before any service
    finally:
        api.remove_network(local)
    # "none": other sandboxes unreachable; "internet": the node's bridge. (cpus 0.5: reservations
    # equal limits, and a 2-CPU node fits two sandboxes of 1 CPU.)
    small = dict(image=image, run_id=run_id, cpus=0.5)
    with provider.open(SandboxSpec(instance_id="none", **small)) as none_sb, \
            provider.open(SandboxSpec(instance_id="net", network="internet", **small)) as inet:
        container = task_container(none_sb)
        assert list(container["NetworkSettings"]["Networks"]) == [networks.ISOLATED]
        assert list(task_container(inet)["NetworkSettings"]["Networks"]) == ["bridge"]
        peer = task_container(none_sb)["NetworkSettings"]["Networks"][networks.ISOLATED]["IPAddress"]
        other = provider.start(SandboxSpec(instance_id="peer", **small))
        try:
            probe = ("import socket,sys\ns=socket.socket();s.settimeout(2)\n"
                     "try:\n s.connect((sys.argv[1],8765));print('open')\nexcept OSError as e:print('refused',e)")
            got = other.exec(["python3", "-c", probe, peer]).stdout
            assert got.startswith("refused"), got  # no traffic between sandboxes
            # The host, through the gateway: refused by the firewall for our bridge (ICMP
            # admin-prohibited: errno 113), not by the host's own stack (111), where rules apply.
            gateway = container["NetworkSettings"]["Networks"][networks.ISOLATED]["Gateway"]
            got = none_sb.exec(["python3", "-c", probe, gateway]).stdout
            if networks.apply_firewall() is None:
                assert got.startswith("refused [Errno 113]"), got
            else:
                assert got.startswith("refused"), got
        finally:
            provider.teardown(other)


def test_the_firewall_holds_for_the_swarms_bridge_applied_while_it_is_away(provider, image, run_id):
    """The swarm's bridge is on a node only while a task on its network runs there (and ~2 s after, measured): a
    preflight that came when it was away applied no rules ("the engine's bridges are not on this host"), and the
    next sandbox reached the host's services through the gateway (errno 111 where the firewall's 113 was due,
    seen under load). The rules name the device, so they are applied whether or not it is there."""
    import shutil

    from harness.sandbox.docker.networks import CHAIN, _firewall_lock
    from tests.helpers.wait import wait_for

    if os.geteuid() != 0 or shutil.which("iptables") is None or not engine.engine_is_local():
        pytest.skip("needs root, iptables and a local engine")
    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="before", cpus=0.5)):
        pass  # the bridge goes ~2 s after a sandbox's removal (after preflight's check alone it may stay a while)
    wait_for(lambda: not os.path.exists(f"/sys/class/net/{networks.BRIDGE}"), 60, "the swarm's bridge to go")
    with _firewall_lock():  # the module's preflight applied them: as if it had come while the bridge was away
        for chain in ("INPUT", "DOCKER-USER", "FORWARD"):
            while subprocess.run(["iptables", "-w", "10", "-D", chain, "-i", networks.BRIDGE, "-j", CHAIN],
                                 capture_output=True, timeout=60).returncode == 0:
                pass
    assert networks.apply_firewall() is None
    assert subprocess.run(["iptables", "-w", "10", "-C", "INPUT", "-i", networks.BRIDGE, "-j", CHAIN],
                          capture_output=True, timeout=60).returncode == 0
    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="fw", cpus=0.5)) as sb:
        gateway = task_container(sb)["NetworkSettings"]["Networks"][networks.ISOLATED]["Gateway"]
        probe = ("import socket,sys\ns=socket.socket();s.settimeout(2)\n"
                 "try:\n s.connect((sys.argv[1],8765));print('open')\nexcept OSError as e:print('refused',e)")
        got = sb.exec(["python3", "-c", probe, gateway]).stdout
        assert got.startswith("refused [Errno 113]"), got


def test_a_task_images_volume_is_a_tmpfs_share_of_disk_on_swarm(provider, image, run_id, tmp_path):
    """A task image's `VOLUME /data` made an anonymous volume on the node's disk, outside --disk: on swarm too it
    is one of the sandbox's size-limited tmpfs places (storage.tmpfs_places), holding the image's files."""
    from harness.fsutil import tree_hash
    from harness.sandbox.docker import storage
    from harness.sandbox.docker.task_images import task_tag

    context = tmp_path / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {image}\nUSER root\nRUN mkdir -p /data && echo seeded > "
                                        f"/data/seed.txt\nVOLUME /data\n")
    tag = provider.image_of(str(context), log=lambda m: None)
    try:
        with provider.open(SandboxSpec(image=tag, run_id=run_id, instance_id="vol", cpus=0.5, disk="64m")) as sb:
            assert sb.shell("cat /data/seed.txt").stdout == "seeded\n"
            filled = sb.shell("head -c 100M /dev/zero > /data/big; echo $?", timeout=120)
            assert filled.stdout.strip() != "0" and "No space left" in filled.stderr, filled
            df = sb.shell("df -k --output=fstype,size /data | tail -1").stdout.split()
        share = storage.tmpfs_places(tag, 64 << 20)["/data"][0]
        assert df == ["tmpfs", str(-(-share // 4096) * 4)], df
    finally:
        subprocess.run(["docker", "rmi", task_tag(context), f"harness-taskenv:{tree_hash(context)}"],
                       capture_output=True, timeout=120)


def test_cli_cleanup_removes_a_runs_services(provider, image, run_id):
    sb = provider.start(SandboxSpec(image=image, run_id=run_id, instance_id="cli"))
    dry = subprocess.run([sys.executable, "-m", "harness", "cleanup", "--sandbox", "swarm", "--run-id", run_id,
                          "--dry-run"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert sb.name in dry.stdout and [x.name for x in provider.find(run_id)] == [sb.name]
    done = subprocess.run([sys.executable, "-m", "harness", "cleanup", "--sandbox", "swarm", "--run-id", run_id],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sb.name in done.stdout and provider.find(run_id) == []
    with pytest.raises(SandboxDied):
        sb.shell("true")
    with pytest.raises(docker.errors.NotFound):
        engine.client().api.inspect_service(sb.id)


def test_the_conformance_suite_passes_for_swarm(swarm):
    """tests/conformance with HARNESS_CONFORMANCE_PROVIDERS=swarm, browser tests included (~40 s)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/conformance"],
                          capture_output=True, text=True, timeout=900, cwd=REPO,
                          env={**os.environ, "HARNESS_CONFORMANCE_PROVIDERS": "swarm", HELD_ENV: "1"})
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert " passed" in proc.stdout and "[swarm]" not in proc.stdout.split("passed")[-1]
    assert "skipped" not in proc.stdout
