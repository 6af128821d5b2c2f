"""Agents used by the tests (resolved by module:function, like a user's own agent)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.agents.autogen.builtin import assistant


def kills_its_first_sandbox(model_client, envs, instance, limits):
    """On the first attempt, kill the sandbox from inside before the agent starts (infra failure)."""
    marker = Path(os.environ["HARNESS_TEST_MARKER"])
    if not marker.exists():
        marker.write_text("killed once")
        envs.code.run_shell("kill -9 -1", timeout=5)
    return assistant(model_client, envs, instance, limits)
