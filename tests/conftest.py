"""Shared fixtures. Docker tests use the real engine (scripts/ensure-docker.sh starts one)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from harness.sandbox.registry import get_provider

# Chromium's `browser` and `page` (the report and viewer tests)
pytest_plugins = ["tests.helpers.browser"]


def pytest_addoption(parser):
    parser.addoption("--reliability-report", default=None,
                     help="rewrite the fault table in this markdown file (e.g. docs/reliability.md)")


# Tests that must not run at the same time as one another. scripts/test.sh runs the suite on several
# pytest-xdist workers (`-n`); the scheduler below makes each group one unit of work: its tests run one
# after another on one worker while other workers run the rest (each other test is a unit of its own).
#   swarm          only one swarm at a time on the host engine (tests/swarm, the conformance suite's
#                  swarm provider), and the no-swarm test needs the engine out of one
#   second-engine  the session's second dockerd (tests/test_remote_engine.py): started once, not per worker
#   compose        one docker-compose image build, shared by the module
#   static-checks  ruff, mypy and lint-imports over the tree (mypy's cache is shared)
# (By test id, not by an xdist_group mark: xdist 3.8 renames items for those, which pytest 9.2 ignores.)
# A fault file (tests/faults/) is a unit of its own: its tests run one after another (their module fixtures
# are shared), while other workers run other files; what two of them must not share takes a machine lock.
SERIAL_GROUPS = {"tests/swarm/": "swarm", "tests/test_remote_engine.py": "second-engine",
                 "tests/test_compose.py": "compose", "tests/test_static_checks.py": "static-checks"}


def serial_group(nodeid: str) -> str | None:
    """The group of the test with this id (`tests/...py::name[params]`), or None."""
    if nodeid.startswith("tests/conformance/") and ("[swarm]" in nodeid or "[swarm-" in nodeid):
        return "swarm"  # the provider is the first parameter
    if nodeid.startswith("tests/faults/"):
        return "faults:" + nodeid.split("::", 1)[0].removeprefix("tests/faults/")
    return next((group for prefix, group in SERIAL_GROUPS.items() if nodeid.startswith(prefix)), None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SerialGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return serial_group(nodeid) or nodeid

        # (Units go in xdist's order, by their number of tests: swarm first. Starting compose and the second
        # engine with it, as the longest groups, made the three load the sandbox image into other engines at
        # once: each 2-3 times slower, and the compose smoke test's Chromium missed its start.)

    return SerialGroups(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """HARNESS_TEST_TIMELINE=FILE: each test's start and end, where it runs (tests/helpers/timeline.py)."""
    from tests.helpers import timeline

    timeline.started(item.nodeid)
    try:
        return (yield)
    finally:
        timeline.finished(item.nodeid)


def pytest_sessionfinish(session, exitstatus):
    from dataclasses import asdict

    from tests.faults.reliability import RELIABILITY, merge

    target = session.config.getoption("--reliability-report", default=None)
    if hasattr(session.config, "workeroutput"):  # an xdist worker: its records go to the controller
        session.config.workeroutput["reliability"] = [asdict(r) for r in RELIABILITY.records]
    elif target and RELIABILITY.records:
        merge(Path(target), RELIABILITY.records)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller of an xdist run: a worker's fault records join its own (for --reliability-report)."""
    from tests.faults.reliability import RELIABILITY, Record

    RELIABILITY.records += [Record(**r) for r in getattr(node, "workeroutput", {}).get("reliability", [])]


@pytest.fixture(scope="session")
def provider():
    """The default (Docker) provider."""
    return get_provider("docker")


@pytest.fixture(scope="session")
def image(provider) -> str:
    return provider.preflight(log=lambda m: None)


@pytest.fixture
def tcp_transport(monkeypatch):
    """Sandboxes of policy `none` publish a port on the `harness-none` network, as they do where the socket
    transport cannot be used (harness/sandbox/docker/sockets.py): for the tests of that network."""
    from harness.settings import settings

    monkeypatch.setenv("HARNESS_SANDBOX_TRANSPORT", "tcp")
    settings.cache_clear()
    yield
    monkeypatch.delenv("HARNESS_SANDBOX_TRANSPORT")
    settings.cache_clear()


@pytest.fixture
def run_id(provider):
    """A fresh run id; every container of it is removed after the test, whatever happened."""
    rid = f"test-{secrets.token_hex(4)}"
    yield rid
    provider.cleanup(run_id=rid)


@pytest.fixture
def out(tmp_path):
    """A fresh output directory for an end-to-end run; no container of its runs may be left after."""
    from tests.helpers.e2e import out_dir, remove_leftovers

    path = out_dir(tmp_path)
    yield path
    assert remove_leftovers(path) == [], "containers left behind"


@pytest.fixture(scope="session")
def second_engine():
    """A second Docker engine in its own network namespace (tests/helpers/engines.py): TLS on
    `second_engine.tls_url` (client certificates in `second_engine.certs`), unix socket at
    `second_engine.unix_url`. Started once per session, stopped (namespace removed) at the end."""
    from tests.helpers.engines import SecondEngine

    with SecondEngine("second") as engine:
        yield engine
