"""Agent runners and sandbox providers that fail on purpose (tests/test_errors.py).

`--agent tests.helpers.runners:CrashingRunner` is resolved in the agent's process, like a
user's own runner; the providers are used in-process through RunSettings.provider.
"""

from __future__ import annotations

from harness.agents.contract import AgentContext, AgentRunner
from harness.errors import InfraError
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker.provider import DockerProvider


class CrashingRunner(AgentRunner):
    """An agent whose own code breaks on its first turn."""

    async def setup(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    async def turn(self, message: str) -> str:
        raise RuntimeError("the agent under test tripped over its own code")


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
