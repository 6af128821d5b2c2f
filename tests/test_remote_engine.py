"""A remote Docker engine (`--docker-host`): TLS with client certificates, the image copied to it,
sandboxes reached at the engine's address, and a port range smaller than the concurrency.

The remote engine is a second dockerd in its own network namespace (tests/helpers/engines.py),
reached only over TCP with TLS at its own address, as a machine across the network would be.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker import engine
from harness.settings import settings
from tests.helpers.e2e import SMOKE_SUBSET, explain, harness, out_dir, rows
from tests.helpers.wait import holds_for

pytestmark = pytest.mark.docker
SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"


@pytest.fixture(scope="module")
def remote(second_engine):
    """The second engine over TLS: the flags and environment a user gives the harness."""
    return {"flags": ["--docker-host", second_engine.tls_url],
            "env": {"HARNESS_DOCKER_CERT_PATH": str(second_engine.certs)}, "engine": second_engine}


def created_on(eng, run_prefix: str, since: float) -> list[str]:
    """Instance ids of harness containers created on an engine since `since` for runs with this prefix."""
    args = ["events", "--since", f"{since:.3f}", "--until", f"{time.time():.3f}", "--filter", "type=container",
            "--filter", "event=create", "--filter", "label=harness.managed=1", "--format", "{{json .Actor.Attributes}}"]
    out = eng.docker(*args).stdout if eng else subprocess.run(["docker", *args], capture_output=True, text=True,
                                                              check=True).stdout
    attrs = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [a.get("harness.instance_id", "") for a in attrs if a.get("harness.run_id", "").startswith(run_prefix)]


def test_image_is_copied_to_an_engine_that_lacks_it(remote, image):
    eng = remote["engine"]
    eng.docker("rmi", "-f", image, check=False)
    proc = harness("images", "build", *remote["flags"], env=remote["env"], timeout=900)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.strip() == image
    assert "copying" in proc.stderr and "copied" in proc.stderr
    assert eng.docker("image", "inspect", image, check=False).returncode == 0
    again = harness("images", "build", *remote["flags"], env=remote["env"])
    assert again.returncode == 0 and "copying" not in again.stderr  # present now: nothing to do


def test_smoke_set_on_a_remote_tls_engine(remote, image, tmp_path):
    eng = remote["engine"]
    eng.load_image(image)
    out = out_dir(tmp_path, "tls")
    since = time.time() - 1
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--output-dir", out, "--workers", 2,
                   "--website", SMOKE / "website", "--ids", ",".join(SMOKE_SUBSET), *remote["flags"],
                   env=remote["env"], timeout=900)
    assert proc.returncode == 0, explain(proc)
    got = rows(out)
    assert {r["instance_id"]: r["correct"] for r in got} == SMOKE_SUBSET  # as on the local engine (test_run_e2e)
    assert all(r["error"] is None for r in got)
    browsing = [r for r in got if "visit_url" in r["tool_calls"]]
    assert len(browsing) == 4 and all(r["correct"] for r in browsing)
    # Every sandbox ran on the remote engine, none on the local one; nothing is left there.
    remote_ids = created_on(eng, out.name[:12], since)
    # the site's container and the sandbox the site search's crawl ran in, too
    assert sorted(remote_ids) == sorted([r["instance_id"] for r in got] + ["website", "site-crawl"])
    assert created_on(None, out.name[:12], since) == []
    left = eng.docker("ps", "-aq", "--filter", "label=harness.managed=1").stdout.split()
    assert left == []
    assert json.loads((out / "report.json").read_text())["leaked_containers"] == 0


def test_bad_tls_certificates_fail_before_any_container(remote, tmp_path):
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "ca.pem").write_text("x")
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--output-dir", tmp_path / "o",
                   *remote["flags"], env={"HARNESS_DOCKER_CERT_PATH": str(certs)})
    assert proc.returncode == 2, explain(proc)
    assert "HARNESS_DOCKER_CERT_PATH" in proc.stderr and "cert.pem" in proc.stderr
    assert not (tmp_path / "o" / "output.jsonl").exists()


def test_docker_host_must_be_a_url(tmp_path):
    proc = harness("cleanup", "--docker-host", "10.0.0.1")
    assert proc.returncode == 2 and "--docker-host" in proc.stderr


def test_tls_applies_to_tcp_only(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_DOCKER_CERT_PATH", str(tmp_path))
    settings.cache_clear()
    try:
        assert engine.tls_config("ssh://user@example") is None
        assert engine.tls_config("unix:///var/run/docker.sock") is None
        with pytest.raises(InputError, match="ca.pem"):
            engine.tls_config("tcp://127.0.0.1:2376")
    finally:
        monkeypatch.delenv("HARNESS_DOCKER_CERT_PATH")
        settings.cache_clear()


def test_a_port_range_smaller_than_the_workers_makes_them_take_turns(provider, image, run_id, monkeypatch,
                                                                     tcp_transport):
    """One port, two sandboxes: the second start waits for the first to go, then takes its port
    (it used to fail at once with 'no free port')."""
    import socket

    with socket.socket() as sock:  # a port no one uses right now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HARNESS_PORT_RANGE", f"{port}-{port}")
    settings.cache_clear()
    try:
        first = provider.start(SandboxSpec(image=image, run_id=run_id, instance_id="first"))
        assert first.endpoint[1] == port
        got: dict = {}

        def second():
            try:
                got["sandbox"] = provider.start(SandboxSpec(image=image, run_id=run_id, instance_id="second"))
            except BaseException as exc:  # noqa: BLE001 - reported below
                got["error"] = exc

        waiter = threading.Thread(target=second)
        waiter.start()
        holds_for(lambda: waiter.is_alive() and not got, 2, "the second start waits for the port")
        provider.teardown(first)
        waiter.join(60)
        assert "error" not in got, got.get("error")
        assert got["sandbox"].endpoint[1] == port
        assert got["sandbox"].shell("echo hi").stdout == "hi\n"
        provider.teardown(got["sandbox"])
    finally:
        monkeypatch.delenv("HARNESS_PORT_RANGE")
        settings.cache_clear()
