"""Without a swarm the swarm provider is an input error (exit 2), never an engine failure."""

from __future__ import annotations

import pytest

from harness.errors import InputError
from harness.sandbox.registry import get_provider
from tests.helpers.e2e import harness
from tests.helpers.swarm import swarm_state

pytestmark = pytest.mark.docker


def test_an_engine_in_no_swarm_is_an_input_error_before_anything_starts():
    if swarm_state().get("LocalNodeState") != "inactive":
        pytest.skip("the host engine is in a swarm")
    provider = get_provider("swarm")
    for call in (lambda: provider.preflight(log=lambda m: None), provider.find, provider.cleanup):
        with pytest.raises(InputError, match="not part of a swarm"):
            call()
    proc = harness("cleanup", "--sandbox", "swarm")
    assert proc.returncode == 2 and "docker swarm init" in proc.stderr + proc.stdout
