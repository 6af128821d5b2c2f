"""Shared fixtures. Docker tests use the real engine (scripts/ensure-docker.sh starts one)."""

from __future__ import annotations

import secrets

import pytest

from harness.sandbox.docker import cleanup


@pytest.fixture(scope="session")
def image() -> str:
    from harness.images.build import build

    return build(log=lambda m: None)


@pytest.fixture
def run_id():
    """A fresh run id; every container of it is removed after the test, whatever happened."""
    rid = f"test-{secrets.token_hex(4)}"
    yield rid
    cleanup.reap(run_id=rid)
