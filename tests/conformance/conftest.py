"""The sandbox conformance suite: what every sandbox provider must do.

Each test speaks the contract only (harness/sandbox/contract.py: `SandboxProvider` and
`Sandbox`), never an engine's API, so the same tests judge any provider. They run once per
provider named in the test-only variable

    HARNESS_CONFORMANCE_PROVIDERS   comma-separated provider names, as `--sandbox` takes them
                                    (a registered name or package.module:Class); default "docker"

e.g. `HARNESS_CONFORMANCE_PROVIDERS=docker,mypkg.sandboxes:MyProvider pytest tests/conformance`.
The variable is read by this test suite only; the harness itself never reads it.

Tests that start the sandbox's browser are marked `browser` (a few seconds each);
`-m "not browser"` skips them.
"""

from __future__ import annotations

import os
import secrets

import pytest

from harness.sandbox.contract import SandboxSpec
from harness.sandbox.registry import get_provider

PROVIDERS = [name.strip() for name in os.environ.get("HARNESS_CONFORMANCE_PROVIDERS", "docker").split(",")
             if name.strip()]


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: starts the sandbox's browser (slow: a few seconds)")


@pytest.fixture(scope="session", params=[
    pytest.param(name, id=name, marks=[pytest.mark.docker] if name in ("docker", "swarm") else []) for name in PROVIDERS
])
def provider(request):
    """Each provider under test (overrides the suite-wide Docker-only `provider`); for swarm, a
    real single-node swarm on the host engine first (made only if the engine is in none)."""
    if request.param == "swarm":
        request.getfixturevalue("swarm_engine")
    return get_provider(request.param)


@pytest.fixture(scope="session")
def swarm_engine():
    from tests.helpers.swarm import single_node_swarm

    with single_node_swarm() as made:
        yield made


@pytest.fixture(scope="session")
def image(provider) -> str:
    return provider.preflight(log=lambda m: None)


def new_run_id() -> str:
    return f"conf-{secrets.token_hex(4)}"


@pytest.fixture
def run_id(provider):
    """A fresh run id; whatever of it is left is removed after the test."""
    rid = new_run_id()
    yield rid
    provider.cleanup(run_id=rid)


@pytest.fixture
def make_spec(image, run_id):
    """SandboxSpec factory for this test's run."""

    def make(instance: str = "i", **kwargs) -> SandboxSpec:
        return SandboxSpec(image=image, run_id=run_id, instance_id=instance, **kwargs)

    return make


@pytest.fixture
def fresh(provider, make_spec):
    """A sandbox of this test's own (for tests that stress or break it)."""
    with provider.open(make_spec("fresh")) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def sandbox(provider, image):
    """One sandbox shared by a module's tests that leave it as they found it."""
    rid = new_run_id()
    try:
        with provider.open(SandboxSpec(image=image, run_id=rid, instance_id="shared")) as shared:
            yield shared
    finally:
        provider.cleanup(run_id=rid)
