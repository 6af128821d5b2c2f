"""What only the Docker provider does: engine-level limits, isolation, ports, PID 1, and the CLI cleanup.

Provider-neutral behaviour (exec, files, lifecycle, endpoint) is in tests/conformance.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import docker
import pytest

from harness.errors import SandboxBadRequest, SandboxDied
from harness.sandbox.contract import SandboxSpec, parse_size
from harness.sandbox.docker import cleanup, engine, storage
from harness.sandbox.docker.provider import DockerSandbox
from harness.sandbox.service import TOKEN_HEADER, ServiceClient
from tests.helpers.locks import machine_lock
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.docker


def spec(image, run_id, instance="i", **kw):
    return SandboxSpec(image=image, run_id=run_id, instance_id=instance, **kw)


def health(sb) -> tuple[int, dict]:
    conn = sb.connection()
    req = urllib.request.Request(conn.url("/health"), headers=dict(conn.headers))
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status, json.loads(resp.read())


def test_the_docker_provider_makes_docker_sandboxes(provider, image, run_id):
    with provider.open(spec(image, run_id)) as sb:
        assert isinstance(sb, DockerSandbox)
        # The harness's name is a label: the container has no Docker name (the embedded DNS would
        # hand it to other sandboxes).
        assert engine.client().api.inspect_container(sb.id)["Config"]["Labels"]["harness.name"] == sb.name
        assert sb.handle().ref == {"container_id": sb.id}


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_sixteen_parallel_sandboxes_have_unique_names_and_ports_that_answer(provider, image, run_id, transport,
                                                                            request):
    if transport == "tcp":
        request.getfixturevalue("tcp_transport")

    def one(i):
        with provider.open(spec(image, run_id, f"inst {i}/ü")) as sb:
            status, body = health(sb)
            handle = sb.handle()  # a published port, or a socket of its own
            return sb.name, handle.socket or handle.port, status, body, sb.shell(f"echo {i}").stdout.strip()

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(16)))
    names = [r[0] for r in results]
    ports = [r[1] for r in results]
    assert len(set(names)) == 16 and len(set(ports)) == 16
    assert all(r[2] == 200 and r[3] == {"ok": True} for r in results)
    assert [r[4] for r in results] == [str(i) for i in range(16)]
    assert provider.find(run_id) == []


CHILD = """
import sys, time
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.registry import get_provider
provider = get_provider("docker")
boxes = [provider.start(SandboxSpec(image=sys.argv[1], run_id=sys.argv[2], instance_id="p" + str(i)))
         for i in range({n})]
print(" ".join(str(b.endpoint[1]) for b in boxes), flush=True)
{tail}
"""


def _spawn(image, run_id, n, tail="", env=None):
    code = CHILD.format(n=n, tail=tail)
    return subprocess.Popen([sys.executable, "-c", code, image, run_id], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


@pytest.mark.parametrize("port_range", [None, "41000-41100"])
def test_several_harness_processes_start_sandboxes_at_once_without_port_collisions(provider, image, run_id,
                                                                                   port_range):
    env = {"HARNESS_SANDBOX_TRANSPORT": "tcp", **({"HARNESS_PORT_RANGE": port_range} if port_range else {})}
    # Each process keeps its sandboxes until every process has started its own.
    tail = "sys.stdin.read()\n[provider.teardown(b) for b in boxes]"
    procs = [_spawn(image, run_id, 5, tail, env) for _ in range(3)]
    lines = [p.stdout.readline() for p in procs]
    outputs = [p.communicate(input="", timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1][-2000:] for o in outputs]
    used = [int(x) for line in lines for x in line.split()]
    assert len(used) == 15 and len(set(used)) == 15
    if port_range:
        assert all(41000 <= p <= 41100 for p in used)
    assert provider.find(run_id) == []


def test_the_service_refuses_what_a_client_should_never_send(provider, image, run_id):
    with provider.open(spec(image, run_id)) as sb:
        conn = sb.connection()
        # Traversal in the archive itself (the host-side packer never makes one).
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("../../tmp/evil")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        client = ServiceClient(conn.host, conn.port, conn.headers[TOKEN_HEADER])
        try:
            with pytest.raises(SandboxBadRequest):
                client.upload(buf.getvalue(), "/workspace")
        finally:
            client.close()
        assert sb.shell("ls /tmp/evil").exit_code != 0
        # A stranger is answered 401 before it sends its body: nothing of it is buffered.
        with socket.create_connection((conn.host, conn.port), timeout=5) as raw:
            raw.sendall(b"POST /exec HTTP/1.1\r\nHost: x\r\nContent-Length: 500000000\r\n\r\n")
            assert raw.recv(100).startswith(b"HTTP/1.1 401")
        assert sb.shell("echo fine").stdout == "fine\n"


def test_limits_and_isolation_are_set(provider, image, run_id, tcp_transport):
    with provider.open(spec(image, run_id, memory="512m", cpus=0.5, pids=64)) as sb, \
            provider.open(spec(image, run_id, "other")) as other:
        attrs = engine.client().api.inspect_container(sb.id)
        host = attrs["HostConfig"]
        # Where the disk limit is tmpfs (RAM), it comes on top of the memory (storage.py).
        extra = 0 if storage.backend(image, sb.spec.disk).kind == "quota" else parse_size(sb.spec.disk)
        assert host["Memory"] == 512 * 1024 * 1024 + extra and host["NanoCpus"] == 500_000_000
        assert host["LogConfig"] == {"Type": "json-file", "Config": storage.LOG_CONFIG["config"]}
        assert host["PidsLimit"] == 64 and host["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host["SecurityOpt"]
        assert not any("docker.sock" in m.get("Source", "") for m in attrs["Mounts"])
        assert sb.shell("id -u").stdout.strip() != "0"
        assert sb.shell("test -S /var/run/docker.sock").exit_code != 0
        other_ip = next(iter(engine.client().api.inspect_container(other.id)["NetworkSettings"]["Networks"]
                             .values()))["IPAddress"]
        probe = ("import socket, sys\nfor target in sys.argv[1:]:\n"
                 "    host, port = target.split(':')\n"
                 "    try:\n        socket.create_connection((host, int(port)), timeout=2); print('open')\n"
                 "    except OSError:\n        print('blocked')\n")
        out = sb.exec(["python3", "-c", probe, "1.1.1.1:443", f"{other_ip}:8765"]).stdout.split()
        assert out == ["blocked", "blocked"]


def test_a_sandbox_killed_by_the_engine_is_reported_as_died(provider, image, run_id):
    with provider.open(spec(image, run_id)) as sb:
        engine.client().api.kill(sb.id)  # the container stays, exited (conformance covers removal)
        with pytest.raises(SandboxDied, match="died"):
            sb.shell("echo hi")


def test_a_timed_out_command_inside_open_still_removes_the_container(provider, image, run_id):
    with provider.open(spec(image, run_id)) as sb:
        name = sb.name
        assert sb.shell("sleep 10", timeout=0.5).timed_out
    assert provider.find(run_id) == []
    with pytest.raises(docker.errors.NotFound):
        engine.client().api.inspect_container(name)


def test_cli_cleanup_removes_a_killed_owners_containers_and_spares_others(provider, image, run_id):
    bystander = engine.client().containers.create(image, name=f"bystander-{run_id}", labels={"test": run_id})
    try:
        child = _spawn(image, run_id, 2, "import time; time.sleep(600)")
        line = child.stdout.readline()
        assert len(line.split()) == 2, child.stderr.read()
        assert len(provider.find(run_id)) == 2
        with machine_lock("reap"):  # tests/helpers/locks.py
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            out = subprocess.run([sys.executable, "-m", "harness", "cleanup"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert provider.find(run_id) == []
        assert engine.client().containers.get(bystander.id).status == "created"
    finally:
        bystander.remove(force=True)


def test_reapers_of_one_engine_take_turns_so_each_orphan_is_named_by_the_one_that_removed_it(provider, image,
                                                                                              run_id):
    """Every `harness run` reaps at its start: one started beside a `harness cleanup` must not take the
    orphans from under it (the cleanup then removed nothing and said so while they vanished; a fresh-clone
    suite run saw it). While one reaper holds the engine's reap lock, another waits its turn."""
    child = _spawn(image, run_id, 1, "import time; time.sleep(600)")
    line = child.stdout.readline()
    assert len(line.split()) == 1, child.stderr.read()
    with machine_lock("reap"):
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        with cleanup.reap_lock():
            other = subprocess.Popen([sys.executable, "-m", "harness", "cleanup"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
            # Unlocked, the other reaper is done in 1-3 s; it must still be waiting for its turn.
            with pytest.raises(subprocess.TimeoutExpired):
                other.wait(timeout=10)
            ours = cleanup.reap()
        out, err = other.communicate(timeout=120)
    # Ours among what it removed: another worker's test may have killed a harness too (a fresh-clone run's
    # reaper took that run's orphan beside ours), and any reaper removes every dead owner's.
    assert [f.run_id for f in ours].count(run_id) == 1, ours
    assert other.returncode == 0 and run_id not in out, (out, err)
    assert provider.find(run_id) == []


def test_agent_code_cannot_kill_the_service_and_orphans_are_reaped(provider, image, run_id):
    with provider.open(spec(image, run_id)) as sb:
        assert sb.shell("ps -o pid=,args= -p 1").stdout.split()[0] == "1"  # sandboxd is init
        sb.shell("kill -9 -1; pkill -9 python3; kill -9 1", timeout=10)
        assert sb.shell("echo still here").stdout == "still here\n"
        # Orphans (a backgrounded child whose parent exits) become init's children: reaped, no zombies.
        sb.shell("for i in 1 2 3 4 5; do (sleep 0.2 &) ; done; setsid sleep 0.2 &")
        wait_for(lambda: "sleep" not in sb.shell("ps -eo stat=,args=").stdout, 30,
                 "the orphans to exit and be reaped (a zombie still shows as [sleep] <defunct>)")
        zombies = sb.shell("ps -eo stat= | grep -c '^Z' || true").stdout.strip()
        assert zombies == "0", sb.shell("ps -eo pid,ppid,stat,args").stdout
