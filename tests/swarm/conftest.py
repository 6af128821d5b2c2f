"""Swarm fixtures: a real single-node swarm on the host engine (tests/helpers/swarm.py), made
only when the engine is in none and left as found; the swarm provider; its image."""

from __future__ import annotations

import secrets
import shutil

import pytest

from harness.sandbox.registry import get_provider
from tests.helpers.swarm import single_node_swarm


@pytest.fixture(scope="module")
def swarm():
    """A single-node swarm per module (a module of 2-node tests needs the engine out of it)."""
    with single_node_swarm() as made:
        yield made


@pytest.fixture(scope="module")
def provider(swarm):
    """The swarm provider (overrides the suite-wide Docker provider)."""
    return get_provider("swarm")


@pytest.fixture(scope="module")
def image(provider) -> str:
    return provider.preflight(log=lambda m: None)


@pytest.fixture(scope="module")
def two_nodes():
    """A real 2-node swarm: the host engine (manager) and a second dockerd in its own network
    namespace (tests/helpers/engines.py) as worker, with the sandbox image loaded (~30 s the
    first time; its data root persists). Yields (node ids, the worker engine)."""
    from harness.sandbox.docker import images
    from tests.helpers.engines import SecondEngine
    from tests.helpers.swarm import two_node_swarm

    image = images.build(log=lambda m: None)
    worker = SecondEngine("swarm-worker")
    # Swarm state a killed session left in the worker's (persistent) data root would make its
    # engine try to rejoin a swarm that is gone; this engine is ours alone (its own name).
    shutil.rmtree(worker.data_root / "swarm", ignore_errors=True)
    with worker, two_node_swarm(worker, image) as ids:
        yield ids, worker


@pytest.fixture
def run_id(provider):
    """A fresh run id; its services are removed after the test."""
    rid = f"test-{secrets.token_hex(4)}"
    yield rid
    provider.cleanup(run_id=rid)
