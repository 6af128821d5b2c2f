"""How often the harness asks the engine: once per process for `docker info`, the container's state
at most every `check_every` seconds while a sandbox starts, and no environment lookups per call."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace

import pytest

from harness.errors import SandboxDied
from harness.sandbox.docker import engine, storage
from harness.sandbox.docker.provider import DockerProvider
from harness.sandbox.service import ServiceClient


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens on it once closed


def test_a_starting_sandbox_asks_the_engine_about_its_state_at_most_every_check_every():
    client = ServiceClient("127.0.0.1", closed_port(), "token")
    asked = []
    with pytest.raises(Exception, match="not ready after"):
        client.wait_ready(1.0, lambda: asked.append(time.monotonic()), check_every=0.25)
    # Before: after every failed poll (~14 in a second); now about 1.0 / 0.25, plus once at the end.
    assert 2 <= len(asked) <= 6, len(asked)


def test_a_sandbox_that_died_while_starting_is_still_noticed():
    client = ServiceClient("127.0.0.1", closed_port(), "token")

    def dead():
        raise SandboxDied("gone")

    started = time.monotonic()
    with pytest.raises(SandboxDied):
        client.wait_ready(30, dead, check_every=0.2)
    assert time.monotonic() - started < 1.0


def test_docker_info_is_asked_once_per_process_even_by_concurrent_first_callers(monkeypatch):
    calls = []

    def info():
        calls.append(1)
        time.sleep(0.2)  # long enough for every thread to arrive while the first call runs
        return {"Driver": "overlay2", "DriverStatus": [["Backing Filesystem", "extfs"]], "NCPU": 2,
                "MemTotal": 1 << 30}

    monkeypatch.setattr(engine, "client", lambda: SimpleNamespace(api=SimpleNamespace(info=info)))
    monkeypatch.setattr(engine, "_info", None)
    threads = [threading.Thread(target=storage._driver) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    capacity = DockerProvider().capacity()
    assert len(calls) == 1
    assert storage._driver() == ("overlay2", "extfs") and capacity.cpus == 2.0


def test_a_forked_process_makes_its_own_engine_client(monkeypatch):
    import os

    monkeypatch.setattr(engine, "_client", object())
    monkeypatch.setattr(engine, "_info", {"ID": "x"})
    pid = os.fork()
    if pid == 0:
        os._exit(0 if engine._client is None and engine._info is None else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert engine._client is not None  # the parent keeps its own


@pytest.mark.docker
def test_the_local_socket_client_skips_the_environment_lookups():
    """requests reads proxy variables and stats ~/.netrc on every call unless told not to: neither
    applies to a socket, and on a 2-core machine it cost ~1 ms of CPU per engine call."""
    client = engine.new_client()
    try:
        assert client.api.base_url.startswith("http+docker://") and client.api.trust_env is False
        assert client.ping()
    finally:
        client.close()


@pytest.mark.docker
@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_a_sandbox_costs_the_engine_a_create_a_start_an_inspect_and_a_removal(provider, image, run_id, monkeypatch,
                                                                              transport, request):
    """The SDK's `containers.create` inspects the container it made; the harness needs its id only, and
    inspects once after the start for the published port, or not at all for a sandbox reached on its
    socket (sandbox/docker/sockets.py). Counted at the SDK's HTTP requests."""
    import re

    if transport == "tcp":
        request.getfixturevalue("tcp_transport")

    from docker.api.client import APIClient

    from harness.sandbox.contract import SandboxSpec

    asked: list[str] = []
    real = APIClient.request

    def request(self, method, url, *args, **kwargs):
        asked.append(f"{method} {re.sub(r'^.*?/containers/', '/containers/', url.split('?')[0])}")
        return real(self, method, url, *args, **kwargs)

    monkeypatch.setattr(APIClient, "request", request)
    sandbox = provider.start(SandboxSpec(image=image, run_id=run_id, instance_id="calls"))
    try:
        assert sandbox.shell("echo hi").stdout == "hi\n"
    finally:
        provider.teardown(sandbox)
    # The container's calls (the process's first start also asks for the engine's info and networks, once);
    # while sandboxd starts, its state may be asked every check_every seconds: those are not counted.
    calls = [a.replace(sandbox.id, "ID") for a in asked if a.split()[1].startswith("/containers/")]
    inspects = [i for i, a in enumerate(calls) if a == "GET /containers/ID/json"]
    polls = inspects[1:] if transport == "tcp" else inspects
    made = [a for i, a in enumerate(calls) if i not in polls]
    assert made == ["POST /containers/create", "POST /containers/ID/start",
                    *(["GET /containers/ID/json"] if transport == "tcp" else []), "DELETE /containers/ID"], calls
