"""The socket transport (harness/sandbox/docker/sockets.py): a sandbox of policy `none` on the local engine
has no network at all and its sandboxd answers on a Unix socket the harness hands it, which the sandbox cannot
reach; where the engine cannot see the socket's directory, the process publishes ports instead (what agent code
cannot do to that directory: tests/test_sandbox_host_disk.py)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import urllib.request
from pathlib import Path

import pytest

from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker import engine, sockets
from harness.sandbox.unix_http import Forward

PROBE = ("import socket, sys\nfor target in sys.argv[1:]:\n    host, port = target.split(':')\n    try:\n"
         "        socket.create_connection((host, int(port)), timeout=2); print('open')\n"
         "    except OSError:\n        print('blocked')\n")
# Agent code tries to put a listener of its own in the mounted directory, to read the harness's requests.
IMPOSTOR = ("import os, socket, time\npath = '/run/harness/handoff.sock'\ns = socket.socket(socket.AF_UNIX)\n"
            "try:\n    s.bind(path); s.listen(); print('planted', flush=True)\n"
            "except OSError as exc:\n    print(exc.strerror)\n")


def spec(image, run_id, instance="i", **kw):
    return SandboxSpec(image=image, run_id=run_id, instance_id=instance, **kw)


@pytest.mark.docker
def test_a_none_sandbox_has_no_network_and_its_socket_is_out_of_the_sandboxs_reach(provider, image, run_id):
    with provider.open(spec(image, run_id)) as sb:
        handle = sb.handle()
        directory, private = sockets.paths(sb.name)
        assert handle.socket == str(private) and private.is_socket() and private.parent == directory.parent
        attrs = engine.client().api.inspect_container(sb.id)
        assert attrs["Config"]["NetworkDisabled"] is True and not attrs["HostConfig"]["PortBindings"]
        interfaces = sb.shell("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").stdout.split()
        assert interfaces == ["lo"]
        assert sb.exec(["python3", "-c", PROBE, "1.1.1.1:443", "172.17.0.1:22"]).stdout.split() == ["blocked"] * 2
        assert sb.shell("ls -A /run/harness").stdout == ""  # handed over and removed before anything ran
        assert sb.exec(["python3", "-c", IMPOSTOR]).stdout == "Read-only file system\n"
        assert sb.shell("echo still sandboxd").stdout == "still sandboxd\n"
        other = provider.attach(handle)  # another process's view: the handle carries the socket
        try:
            assert other.shell("echo attached").stdout == "attached\n"
        finally:
            other.close()
    assert not private.exists() and not directory.exists()


@pytest.mark.docker
def test_tcp_only_clients_reach_a_socket_sandbox_through_a_loopback_port(provider, image, run_id):
    with provider.open(spec(image, run_id)) as sb:
        conn = sb.connection()
        assert conn.host == "127.0.0.1" and sb.connection().port == conn.port  # one forward per client
        request = urllib.request.Request(conn.url("/health"), headers=dict(conn.headers))
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 200
        with socket.create_connection((conn.host, conn.port), timeout=10) as stranger:  # no token: refused
            stranger.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert stranger.recv(100).startswith(b"HTTP/1.1 401")


@pytest.mark.docker
def test_an_engine_that_cannot_see_the_sockets_directory_makes_the_process_publish_ports(
        provider, image, run_id, monkeypatch, caplog):
    """The engine's refusal of a bind source it cannot see (what an engine in a VM, a confined engine or a
    harness in a container meets) gives the transport up for the process, with one warning."""
    from docker.types import Mount

    monkeypatch.setattr(sockets, "_given_up", [])
    real = sockets.mount_options

    def unseen(name: str) -> dict:
        options = real(name)
        options["mounts"] = [Mount(target=sockets.MOUNT, source=f"/nonexistent-{run_id}", type="bind")]
        return options

    monkeypatch.setattr(sockets, "mount_options", unseen)
    with caplog.at_level(logging.WARNING, logger=sockets.__name__):
        with provider.open(spec(image, run_id, "a")) as first, provider.open(spec(image, run_id, "b")) as second:
            for sb in (first, second):
                assert sb.handle().socket is None and sb.handle().port > 0
                assert sb.shell("echo hi").stdout == "hi\n"
            assert not sockets.paths(first.name)[0].exists()
    warnings = [r.getMessage() for r in caplog.records if r.name == sockets.__name__]
    assert len(warnings) == 1 and "publish a port" in warnings[0] and "does not exist" in warnings[0], warnings


@pytest.mark.docker
def test_the_tcp_setting_publishes_a_port_on_the_isolated_network(provider, image, run_id, tcp_transport):
    with provider.open(spec(image, run_id)) as sb:
        assert sb.handle().socket is None and sb.handle().port > 0
        networks = engine.client().api.inspect_container(sb.id)["NetworkSettings"]["Networks"]
        assert list(networks) == ["harness-none"]
        assert sb.shell("echo hi").stdout == "hi\n"


def test_a_forward_pipes_both_ways_and_closes_what_it_holds(tmp_path: Path):
    path = str(tmp_path / "echo.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data.upper())

    threading.Thread(target=echo, daemon=True).start()
    forward = Forward(path)
    with socket.create_connection(("127.0.0.1", forward.port), timeout=10) as client:
        client.sendall(b"hello")
        assert client.recv(100) == b"HELLO"
        forward.close()
        assert client.recv(100) == b""  # the forward ended the connection it held
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", forward.port), timeout=2).close()
    server.close()
    os.unlink(path)


@pytest.mark.docker
def test_a_teardown_cut_short_at_the_engines_removal_has_removed_the_socket_already(provider, image, run_id,
                                                                                   monkeypatch):
    """A harness killed while its engine removes a sandbox (the removal finishes without it) left the socket and
    its directory behind for good (the suite's kill -9 tests found them); they now go before the removal."""
    sandbox = provider.start(spec(image, run_id))
    directory, private = sockets.paths(sandbox.name)

    def killed(container_id, **kwargs):
        real_remove(container_id)
        raise KeyboardInterrupt("the harness dies here")

    real_remove = engine.remove_container
    monkeypatch.setattr(engine, "remove_container", killed)
    with pytest.raises(KeyboardInterrupt):
        provider.teardown(sandbox)
    assert not private.exists() and not directory.exists()


@pytest.mark.docker
def test_the_reaper_sweeps_socket_entries_no_container_owns(provider, image, run_id):
    """What a killed start left (its directory made, no container yet) goes at the next reap once it is old;
    a young entry (a start in progress elsewhere) and a live sandbox's entries stay, however old."""
    from harness.sandbox.docker import cleanup

    with provider.open(spec(image, run_id)) as live:
        stale_dir, stale_sock = sockets.paths(f"killed-start-{run_id}")
        young_dir, _ = sockets.paths(f"starting-{run_id}")
        stale_dir.mkdir()
        stale_sock.write_text("")
        young_dir.mkdir()
        past = os.stat(stale_dir).st_mtime - 3600
        for path in (stale_dir, stale_sock, *sockets.paths(live.name)):
            os.utime(path, (past, past), follow_symlinks=False)
        cleanup.reap()
        assert not stale_dir.exists() and not stale_sock.exists()
        assert young_dir.exists() and all(p.exists() for p in sockets.paths(live.name))
        assert live.shell("echo alive").stdout == "alive\n"
    sockets.remove(f"starting-{run_id}")
