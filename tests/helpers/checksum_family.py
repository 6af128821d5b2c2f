"""A tool family defined in one module, outside the harness: `file_sha256(path)`, offered to an instance
whose metadata sets "checksums" (docs/architecture.md, "To add a tool family").

Defining the class registers it (harness/environments/family.py). This module is also a plug-in agent
(`--agent tests.helpers.checksum_family:PlainRunner`, or `:assistant` for AutoGen's): the agent's process
imports the agent's module before it builds the instance's environments, and the harness's own process
before its dry preflight, so both see the family.
"""

from __future__ import annotations

import time

from harness.agents.autogen.builtin import assistant
from harness.agents.plain.runner import PlainRunner
from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.family import Needs, Setup, Tool, ToolFamily
from harness.sandbox.contract import Sandbox
from harness.traces import EnvAction, Tracer

__all__ = ["Checksum", "PlainRunner", "assistant"]


class ChecksumEnv:
    def __init__(self, sandbox: Sandbox, tracer: Tracer):
        self.sandbox, self.tracer = sandbox, tracer

    def sha256(self, path: str) -> str:
        started = time.monotonic()
        result = self.sandbox.exec(["sha256sum", "--", path], timeout=30)
        outcome = "ok" if result.exit_code == 0 else "error"
        self.tracer.emit(EnvAction(env="checksum", action="file_sha256", args={"path": path}, outcome=outcome,
                                   seconds=round(time.monotonic() - started, 4)))
        return result.stdout.split()[0] if outcome == "ok" else f"Error: {result.stderr.strip()}"


class Checksum(ToolFamily[ChecksumEnv]):
    name, order = "checksum", 85  # after search_corpus, before the MCP servers' tools
    needs = Needs(apt=("coreutils",))

    def offered(self, setup: Setup) -> bool:
        return setup.instance is not None and bool(setup.instance.metadata.get("checksums"))

    def build(self, setup: Setup, envs: Environments) -> ChecksumEnv:
        return ChecksumEnv(setup.sandbox, setup.tracer)

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        checksums = envs.of(Checksum)
        if checksums is None:
            return []

        async def file_sha256(path: str) -> str:
            """The SHA-256 checksum of a workspace file, in hex."""
            return await envs.call(checksums.sha256, path)

        return [file_sha256]
