"""Shared fixtures. Docker tests use the real engine (scripts/ensure-docker.sh starts one)."""

from __future__ import annotations

import secrets

import pytest

from harness.sandbox.registry import get_provider

# Chromium's `browser` and `page` (the report and viewer tests)
pytest_plugins = ["tests.helpers.browser"]


def pytest_addoption(parser):
    parser.addoption("--reliability-report", default=None,
                     help="rewrite the fault table in this markdown file (e.g. docs/reliability.md)")


def pytest_sessionfinish(session, exitstatus):
    from pathlib import Path

    from tests.faults.reliability import RELIABILITY, merge

    target = session.config.getoption("--reliability-report", default=None)
    if target and RELIABILITY.records:
        merge(Path(target), RELIABILITY.records)


@pytest.fixture(scope="session")
def provider():
    """The default (Docker) provider."""
    return get_provider("docker")


@pytest.fixture(scope="session")
def image(provider) -> str:
    return provider.preflight(log=lambda m: None)


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
