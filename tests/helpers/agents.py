"""Agents used by the tests (resolved by module:function, like a user's own agent)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.agents.autogen.builtin import assistant
from harness.sandbox.docker import engine


def kills_its_first_sandbox(model_client, envs, instance, limits):
    """On the first attempt, the engine kills the sandbox before the agent starts (an infra failure:
    agent code itself cannot, since the sandbox's service is its PID 1)."""
    sandbox_id = envs.code.sandbox.id  # first: the preflight's dry construction (no sandbox) stops here
    marker = Path(os.environ["HARNESS_TEST_MARKER"])
    if not marker.exists():
        marker.write_text("killed once")
        engine.client().api.kill(sandbox_id)
    return assistant(model_client, envs, instance, limits)
