"""The sandbox core against the real Docker engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import tarfile
import io
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import docker
import pytest

from harness.errors import InputError, SandboxDied
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker import cleanup, engine
from harness.sandbox.docker.provider import open_sandbox, start, teardown
from harness.sandbox.service import RequestRefused

pytestmark = pytest.mark.docker


def spec(image, run_id, instance="i", **kw):
    return SandboxSpec(image=image, run_id=run_id, instance_id=instance, **kw)


def health(host, port, token=None):
    req = urllib.request.Request(f"http://{host}:{port}/health", headers={"X-Harness-Token": token or ""})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status, json.loads(resp.read())


def test_sixteen_parallel_sandboxes_have_unique_names_and_ports_that_answer(image, run_id):
    def one(i):
        with open_sandbox(spec(image, run_id, f"inst {i}/ü")) as sb:
            host, port = sb.endpoint
            status, body = health(host, port, sb.service.token)
            return sb.name, port, status, body, sb.shell(f"echo {i}").stdout.strip()

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(16)))
    names = [r[0] for r in results]
    ports = [r[1] for r in results]
    assert len(set(names)) == 16 and len(set(ports)) == 16
    assert all(r[2] == 200 and r[3] == {"ok": True} for r in results)
    assert [r[4] for r in results] == [str(i) for i in range(16)]
    assert cleanup.find(run_id) == []


def test_service_refuses_requests_without_the_token(image, run_id):
    with open_sandbox(spec(image, run_id)) as sb:
        with pytest.raises(urllib.error.HTTPError) as err:
            health(*sb.endpoint, token="wrong")
        assert err.value.code == 401


CHILD = """
import sys, time
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker.provider import start
from harness.sandbox.docker import ports
boxes = [start(SandboxSpec(image=sys.argv[1], run_id=sys.argv[2], instance_id="p" + str(i))) for i in range({n})]
print(" ".join(str(b.endpoint[1]) for b in boxes), flush=True)
{tail}
"""


def _spawn(image, run_id, n, tail="", env=None):
    code = CHILD.format(n=n, tail=tail)
    return subprocess.Popen([sys.executable, "-c", code, image, run_id], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


@pytest.mark.parametrize("port_range", [None, "41000-41100"])
def test_several_harness_processes_start_sandboxes_at_once_without_port_collisions(image, run_id, port_range):
    env = {"HARNESS_PORT_RANGE": port_range} if port_range else {}
    # Each process keeps its sandboxes until every process has started its own.
    tail = "from harness.sandbox.docker.provider import teardown\nsys.stdin.read()\n[teardown(b) for b in boxes]"
    procs = [_spawn(image, run_id, 5, tail, env) for _ in range(3)]
    lines = [p.stdout.readline() for p in procs]
    outputs = [p.communicate(input="", timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1][-2000:] for o in outputs]
    used = [int(x) for line in lines for x in line.split()]
    assert len(used) == 15 and len(set(used)) == 15
    if port_range:
        assert all(41000 <= p <= 41100 for p in used)
    assert cleanup.find(run_id) == []


def test_files_are_copied_with_their_names_and_escapes_are_refused(image, run_id, tmp_path):
    root = tmp_path / "task"
    (root / "sub dir").mkdir(parents=True)
    (root / "data.csv").write_text("a,b\n1,2\n")
    (root / "sub dir" / "ünï.txt").write_text("nested")
    (root / "inside-link").symlink_to(root / "data.csv")
    (tmp_path / "secret").write_text("host secret")
    (root / "escape-link").symlink_to(tmp_path / "secret")
    with open_sandbox(spec(image, run_id)) as sb:
        sb.copy_in(root, ["data.csv", "sub dir", "inside-link"])
        listing = sb.shell("cd /workspace && find . -type f | sort && cat inside-link").stdout
        assert listing.splitlines() == ["./data.csv", "./inside-link", "./sub dir/ünï.txt", "a,b", "1,2"]
        for bad in ["../secret", "/etc/passwd", "escape-link", "sub dir/../../secret"]:
            with pytest.raises(InputError):
                sb.copy_in(root, [bad])
        # The service itself refuses traversal even if a client skipped the checks.
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("../../tmp/evil")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        with pytest.raises(RequestRefused):
            sb.service.upload(buf.getvalue(), "/workspace")
        assert sb.shell("ls /tmp/evil").exit_code != 0


def test_timeout_kills_the_whole_process_tree(image, run_id):
    with open_sandbox(spec(image, run_id)) as sb:
        started = time.monotonic()
        result = sb.shell("sleep 301 & (sleep 302 &) ; setsid sleep 303 & python3 -c 'import time; time.sleep(304)'",
                          timeout=1.5)
        assert result.timed_out and not result.ok
        assert time.monotonic() - started < 10
        time.sleep(0.3)
        left = sb.shell("ps -eo args | grep -c '^sleep 30' || true").stdout.strip()
        assert left == "0", sb.shell("ps -eo pid,ppid,pgid,sid,args").stdout
        assert "time.sleep(304)" not in sb.shell("ps -eo args").stdout


def test_output_is_capped_with_a_marker_and_binary_is_decoded(image, run_id):
    with open_sandbox(spec(image, run_id)) as sb:
        big = sb.shell("head -c 3000000 /dev/zero | tr '\\0' a; echo err >&2", max_output=1000)
        assert big.stdout_truncated and not big.stderr_truncated
        assert big.stdout.startswith("a" * 1000) and "truncated: 2999000 more bytes" in big.stdout
        assert len(big.stdout) < 1200 and big.stderr == "err\n"
        binary = sb.shell("printf 'ok\\xff\\xfe\\x00end'")
        assert binary.stdout == "ok\ufffd\ufffd\x00end"
        assert sb.shell("exit 7").exit_code == 7
        assert sb.python("import sys; print(sys.stdin.read() if False else 6*7)").stdout == "42\n"


def test_limits_and_isolation_are_set(image, run_id):
    with open_sandbox(spec(image, run_id, memory="512m", cpus=0.5, pids=64)) as sb, \
            open_sandbox(spec(image, run_id, "other")) as other:
        attrs = engine.client().api.inspect_container(sb.id)
        host = attrs["HostConfig"]
        assert host["Memory"] == 512 * 1024 * 1024 and host["NanoCpus"] == 500_000_000
        assert host["PidsLimit"] == 64 and host["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host["SecurityOpt"]
        assert not any("docker.sock" in m.get("Source", "") for m in attrs["Mounts"])
        assert sb.shell("id -u").stdout.strip() != "0"
        assert sb.shell("test -S /var/run/docker.sock").exit_code != 0
        other_ip = next(iter(engine.client().api.inspect_container(other.id)["NetworkSettings"]["Networks"].values()))["IPAddress"]
        probe = ("import socket, sys\nfor target in sys.argv[1:]:\n"
                 "    host, port = target.split(':')\n"
                 "    try:\n        socket.create_connection((host, int(port)), timeout=2); print('open')\n"
                 "    except OSError:\n        print('blocked')\n")
        out = sb.exec(["python3", "-c", probe, "1.1.1.1:443", f"{other_ip}:8765"]).stdout.split()
        assert out == ["blocked", "blocked"]


def test_dead_sandbox_raises_a_distinct_error(image, run_id):
    with open_sandbox(spec(image, run_id)) as sb:
        engine.client().api.kill(sb.id)
        with pytest.raises(SandboxDied):
            sb.shell("echo hi")


@pytest.mark.parametrize("how", ["exception", "keyboard", "timeout"])
def test_teardown_on_every_path(image, run_id, how):
    name = None
    with pytest.raises((ValueError, KeyboardInterrupt)) if how != "timeout" else _nothing():
        with open_sandbox(spec(image, run_id)) as sb:
            name = sb.name
            if how == "exception":
                raise ValueError("boom")
            if how == "keyboard":
                raise KeyboardInterrupt
            assert sb.shell("sleep 10", timeout=0.5).timed_out
    assert name and cleanup.find(run_id) == []
    with pytest.raises(docker.errors.NotFound):
        engine.client().api.inspect_container(name)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_cleanup_removes_a_killed_owners_containers_and_spares_others(image, run_id):
    bystander = engine.client().containers.create(image, name=f"bystander-{run_id}",
                                                  labels={"test": run_id})
    try:
        child = _spawn(image, run_id, 2, "import time; time.sleep(600)")
        line = child.stdout.readline()
        assert len(line.split()) == 2, child.stderr.read()
        assert len(cleanup.find(run_id)) == 2
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        out = subprocess.run([sys.executable, "-m", "harness", "cleanup"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert cleanup.find(run_id) == []
        assert engine.client().containers.get(bystander.id).status == "created"
    finally:
        bystander.remove(force=True)


def test_cleanup_leaves_live_owners_alone(image, run_id):
    sb = start(spec(image, run_id))
    try:
        cleanup.reap()  # orphans only: our owner (this process) is alive
        assert len(cleanup.find(run_id)) == 1
        removed = cleanup.reap(run_id=run_id)
        assert [f.name for f in removed] == [sb.name]
    finally:
        teardown(sb)


def test_agent_code_cannot_kill_the_service_and_orphans_are_reaped(image, run_id):
    with open_sandbox(spec(image, run_id)) as sb:
        assert sb.shell("ps -o pid=,args= -p 1").stdout.split()[0] == "1"  # sandboxd is init
        sb.shell("kill -9 -1; pkill -9 python3; kill -9 1", timeout=10)
        assert sb.shell("echo still here").stdout == "still here\n"
        # Orphans (a backgrounded child whose parent exits) become init's children: reaped, no zombies.
        sb.shell("for i in 1 2 3 4 5; do (sleep 0.2 &) ; done; setsid sleep 0.2 &")
        time.sleep(3.5)
        zombies = sb.shell("ps -eo stat= | grep -c '^Z' || true").stdout.strip()
        assert zombies == "0", sb.shell("ps -eo pid,ppid,stat,args").stdout


def test_unauthenticated_requests_get_nothing_buffered(image, run_id):
    import socket

    with open_sandbox(spec(image, run_id)) as sb:
        host, port = sb.endpoint
        with socket.create_connection((host, port), timeout=5) as conn:
            conn.sendall(b"POST /exec HTTP/1.1\r\nHost: x\r\nContent-Length: 500000000\r\n\r\n")
            assert conn.recv(100).startswith(b"HTTP/1.1 401")  # answered before any body was sent
