"""A no-op agent for bench/throughput.py: runs one command in the sandbox, then answers.

  harness run ... --agent bench.noop:NoopRunner   (from the repo root: the harness adds the
                                                    working directory to sys.path)
"""

from __future__ import annotations

from harness.agents.contract import AgentContext, AgentRunner


class NoopRunner(AgentRunner):
    async def setup(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    async def turn(self, message: str) -> str:
        envs = self.ctx.envs
        result = await envs.call(envs.code.run_shell, "cat /workspace/data.txt")
        return f"<solution>{result.stdout.strip()}</solution>"
