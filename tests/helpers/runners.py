"""Agent runners and sandbox providers that fail on purpose (tests/test_errors.py).

`--agent tests.helpers.runners:CrashingRunner` is resolved in the agent's process, like a
user's own runner; the providers are used in-process through RunSettings.provider.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from harness.agents.contract import AgentContext, AgentRunner
from harness.agents.plain.runner import PlainRunner
from harness.errors import InfraError
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker.provider import DockerProvider


class CrashingRunner(AgentRunner):
    """An agent whose own code breaks on its first turn."""

    async def setup(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    async def turn(self, message: str) -> str:
        raise RuntimeError("the agent under test tripped over its own code")


class CrashesOnSome(PlainRunner):
    """The plain runner, except on instances whose id starts with "crash": there its own code
    raises, with a message of several lines and a terminal escape in it (as a traceback or a
    framework's error may be)."""

    async def turn(self, message: str) -> str:
        if self.ctx.instance.instance_id.startswith("crash"):
            raise RuntimeError("the agent tripped \x1b[31mover its own code\nsecond line of the message")
        return await super().turn(message)


class CountingProvider(DockerProvider):
    """Docker sandboxes, counting how many were started."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[int] = []  # the attempt of each start

    def start(self, spec: SandboxSpec):
        self.starts.append(spec.attempt)
        return super().start(spec)


class FlakyProvider(CountingProvider):
    """The engine fails the first `failures` starts (an infra error), then works."""

    def __init__(self, failures: int = 1) -> None:
        super().__init__()
        self.failures = failures

    def start(self, spec: SandboxSpec):
        if len(self.starts) < self.failures:
            self.starts.append(spec.attempt)
            raise InfraError(f"engine hiccup starting attempt {spec.attempt}")
        return super().start(spec)


class SlowRemovalProvider(DockerProvider):
    """Docker sandboxes whose removal takes 1.5 s (as one in which Chromium ran takes ~4 s); the most
    removals under way at once is written to $HARNESS_TEST_MARKER."""

    def __init__(self) -> None:
        super().__init__()
        self.lock, self.now, self.most = threading.Lock(), 0, 0

    def teardown(self, sandbox) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            Path(os.environ["HARNESS_TEST_MARKER"]).write_text(str(self.most))
        try:
            time.sleep(1.5)
            super().teardown(sandbox)
        finally:
            with self.lock:
                self.now -= 1


class LeakProbe(AgentRunner):
    """Reports what it finds of earlier instances, then leaves traces of its own: a module global,
    an environment variable, a file descriptor. With nothing shared, every instance reports
    counter=0 env=absent. preloaded=True shows the process came from the fork server."""

    preload = ("tests.helpers.probe_preloaded",)

    async def setup(self, ctx) -> None:
        import sys

        self.preloaded = "tests.helpers.probe_preloaded" in sys.modules

    async def turn(self, message: str) -> str:
        import os

        from tests.helpers import probe_preloaded as probe

        seen = (f"preloaded={self.preloaded} counter={probe.STATE['counter']} "
                f"env={os.environ.get('HARNESS_TEST_LEAK', 'absent')} pid={os.getpid()} pgid={os.getpgid(0)}")
        probe.STATE["counter"] += 1
        os.environ["HARNESS_TEST_LEAK"] = "present"
        self.fd = os.open(os.devnull, os.O_RDONLY)
        return f"<solution>{seen}</solution>"
