"""Typed engine errors: engine.py alone reads an engine's answer and raises its refusal as a type
(harness/errors.py: EngineNotFound, EngineConflict, EngineInUse, PortTaken); every other module
decides by the type. The unit tests feed real docker.errors.APIError objects built the way the SDK
builds them (an HTTP answer with the engine's JSON body), with the words dockerd 20.10 answered
when asked (tests below marked docker ask it again)."""

from __future__ import annotations

import http
import json
import subprocess

import docker.errors
import pytest
import requests

from harness.errors import (
    EngineConflict,
    EngineInUse,
    EngineKillTimedOut,
    EngineNotFound,
    EngineRefused,
    InfraError,
    PortTaken,
)
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker import cleanup, engine, naming, ports
from harness.sandbox.swarm import networks as swarm_networks
from harness.settings import settings


def api_error(status: int, message: str, path: str = "/v1.41/containers/x/start") -> docker.errors.APIError:
    """The exception the SDK raises for this answer (docker.errors.create_api_error_from_http_exception)."""
    response = requests.Response()
    response.status_code, response.reason = status, http.HTTPStatus(status).phrase
    response._content = json.dumps({"message": message}).encode()
    response.url = f"http+docker://localhost{path}"
    try:
        response.raise_for_status()
    except requests.HTTPError as http_error:
        try:
            docker.errors.create_api_error_from_http_exception(http_error)
        except docker.errors.APIError as exc:
            return exc
    raise AssertionError("the SDK raised nothing")


# What dockerd 20.10 answered (status, message), and the type each one is.
ANSWERS = [
    (500, "driver failed programming external connectivity on endpoint sb (ba39551f): Bind for 127.0.0.1:34307 "
          "failed: port is already allocated", PortTaken),
    (500, "driver failed programming external connectivity on endpoint sb (ba39551f): Error starting userland "
          "proxy: listen tcp4 127.0.0.1:34307: bind: address already in use", PortTaken),
    (403, "error while removing network: network harness-site-x id aff0d3a5c0bf has active endpoints", EngineInUse),
    (409, "network with name harness-swarm-none already exists", EngineConflict),
    (409, "removal of container 33ee6deb9e5d is already in progress", EngineConflict),
    (409, 'Conflict. The container name "/harness-x" is already in use by container "33ee6deb9e5d". You have to '
          "remove (or rename) that container to be able to reuse that name.", EngineConflict),
    (404, "No such container: harness-x", EngineNotFound),
    (404, "no such image: nosuch:1: No such image: nosuch:1", EngineNotFound),
    (404, "network harness-x not found", EngineNotFound),
    (500, "Could not kill running container a0a4cea610fc, cannot remove - tried to kill container, but did not "
          "receive an exit event", EngineKillTimedOut),
]


@pytest.mark.parametrize(("status", "message", "kind"), ANSWERS)
def test_each_refusal_the_harness_decides_on_is_raised_as_its_type(status, message, kind):
    exc = api_error(status, message)
    assert engine.refusal(exc) is kind
    with pytest.raises(kind) as raised:
        engine.call("start", lambda: (_ for _ in ()).throw(exc), retries=0)
    assert isinstance(raised.value, InfraError) and raised.value.__cause__ is exc
    assert str(raised.value).startswith("docker start failed: ")


@pytest.mark.parametrize(("status", "message"), [
    (500, "Cannot start container: OCI runtime create failed"),
    (403, "harness-none is a pre-defined network and cannot be removed"),  # a 403 that is not 'in use'
    (400, "invalid reference format"),
])
def test_other_failures_stay_plain_infra_errors(status, message):
    exc = api_error(status, message)
    assert engine.refusal(exc) is None
    with pytest.raises(InfraError) as raised:
        engine.call("start", lambda: (_ for _ in ()).throw(exc), retries=0)
    assert not isinstance(raised.value, EngineRefused)


def test_a_taken_port_is_not_retried_though_it_is_a_500_and_other_500s_are(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)  # the backoff between retries
    for message, kind, tries in [(ANSWERS[0][1], PortTaken, 1), ("Internal Server Error", InfraError, 3)]:
        attempts = []

        def fails(message=message, attempts=attempts):
            attempts.append(1)
            raise api_error(500, message)

        with pytest.raises(kind):
            engine.call("start", fails, retries=2)
        assert len(attempts) == tries, message


class _Api:
    """The one SDK method a test needs, failing with a given engine answer (pure logic)."""

    def __init__(self, **failures: docker.errors.APIError):
        self.failures = failures

    def __getattr__(self, name):
        def method(*args, **kwargs):
            raise self.failures[name]

        return method


def test_a_removal_already_in_progress_or_a_gone_container_is_fine_and_anything_else_is_not(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)  # the backoff between retries of the 500
    for status, message, raises in [(409, ANSWERS[4][1], None), (404, "No such container: x", None),
                                    (500, "driver failed to remove root filesystem", InfraError)]:
        api = _Api(remove_container=api_error(status, message))
        monkeypatch.setattr(engine, "client", lambda api=api: type("C", (), {"api": api})())
        if raises is None:
            engine.remove_container("x")
        else:
            with pytest.raises(raises):
                engine.remove_container("x")


def test_a_swarm_network_another_process_just_made_is_taken_as_made(monkeypatch):
    monkeypatch.setattr(swarm_networks, "_find", lambda api, name: None)
    api = _Api(_post_json=api_error(409, ANSWERS[3][1], "/v1.41/networks/create"))
    monkeypatch.setattr(api, "_url", lambda path: path, raising=False)
    swarm_networks.ensure_node_config(api)  # no error: it exists now
    api.failures["_post_json"] = api_error(500, "failed to allocate network IP", "/v1.41/networks/create")
    with pytest.raises(InfraError):
        swarm_networks.ensure_node_config(api)


def test_no_module_but_engine_py_reads_an_exceptions_text_in_the_sandbox_packages():
    """The rule this file tests, kept: deciding by an engine's words happens in one place."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "harness" / "sandbox"
    readers = []
    for path in [*root.glob("docker/*.py"), *root.glob("swarm/*.py")]:
        text = path.read_text()
        if path.name != "engine.py" and any(w in text for w in ("str(exc)", ".explanation", "docker.errors")):
            readers.append(path.name)
    assert readers == []


# ---------------------------------------------------------------- the real engine
@pytest.mark.docker
def test_the_engine_answers_are_still_the_ones_classified(run_id):
    api = engine.client().api
    with pytest.raises(EngineNotFound):
        engine.call("inspect", lambda: api.inspect_container(f"{run_id}-nosuch"))
    name = f"harness-test-{run_id}"
    engine.call("network create", lambda: api.create_network(name, labels={naming.LABEL_MANAGED: "1"}), retries=0)
    try:
        with pytest.raises(EngineConflict):
            engine.call("network create", lambda: api.create_network(name, check_duplicate=True), retries=0)
    finally:
        engine.remove_network(name)


@pytest.mark.docker
def test_a_port_taken_at_start_is_skipped_for_the_next_in_the_range(provider, image, run_id, monkeypatch,
                                                                     tcp_transport):
    """The checks before a start do not see every holder of a port (another machine's start on a
    remote engine): here they are blinded, so the engine's own refusal must move the start on."""
    taken = next(port for port in range(42000, 43000, 7) if ports.free_locally(port) and ports.free_locally(port + 1))
    free = taken + 1
    holder = engine.client().containers.create(image, entrypoint=["sleep", "600"], labels={"test": run_id},
                                               ports={f"{ports.SERVICE_PORT}/tcp": ("127.0.0.1", taken)})
    try:
        holder.start()
        monkeypatch.setattr(ports, "ports_in_use", lambda: set())
        monkeypatch.setattr(ports, "free_locally", lambda port: True)
        monkeypatch.setattr(ports, "port_range", lambda: range(taken, free + 1))
        settings.cache_clear()
        sandbox = provider.start(SandboxSpec(image=image, run_id=run_id, instance_id="port"))
        try:
            assert sandbox.endpoint[1] == free
            assert sandbox.shell("echo hi").stdout == "hi\n"
        finally:
            provider.teardown(sandbox)
    finally:
        holder.remove(force=True, v=True)


@pytest.mark.docker
def test_cleanup_keeps_a_runs_network_that_a_container_it_did_not_choose_still_uses(image, run_id):
    api = engine.client().api
    name = f"harness-site-{run_id}"
    labels = {naming.LABEL_MANAGED: "1", naming.LABEL_RUN: run_id, naming.LABEL_OWNER: naming.owner_token()}
    engine.call("network create", lambda: api.create_network(name, labels=labels), retries=0)
    bystander = engine.client().containers.create(image, entrypoint=["sleep", "600"], network=name,
                                                  labels={"test": run_id})
    try:
        bystander.start()
        removed = cleanup.reap(run_id=run_id)
        assert name not in [item.name for item in removed]
        assert subprocess.run(["docker", "network", "inspect", name], capture_output=True).returncode == 0
    finally:
        bystander.remove(force=True, v=True)
        engine.remove_network(name)


def test_a_removal_whose_kill_timed_out_asks_again_until_the_container_is_gone(monkeypatch):
    """A sandbox full of busy processes: dockerd's kill gave up waiting for the exit (a 500); the removal
    asks again (it failed the run with exit 1 before), and gives up only after its patience."""
    monkeypatch.setattr("time.sleep", lambda s: None)
    timed_out = api_error(500, ANSWERS[-1][1], "/v1.41/containers/x")
    answers = [timed_out, timed_out, None]

    class Api:
        def remove_container(self, *args, **kwargs):
            if (answer := answers.pop(0)) is not None:
                raise answer

    monkeypatch.setattr(engine, "client", lambda: type("C", (), {"api": Api()})())
    engine.remove_container("x")
    assert answers == []
    answers[:] = [timed_out] * 50
    with pytest.raises(EngineKillTimedOut):
        engine.remove_container("x", patience=0.0)
