"""`--agent oracle`: each instance solved by its own reference actions, through the same tools an agent gets.
It must score 100 % on every well-formed instance: a run of it proves the dataset, the image and the judge
before anyone pays for a model. It runs the instance's benchmark's oracle (harness/benchmark.py
`Benchmark.oracle`); an instance of a benchmark without one is the agent's error, said so. It calls no model."""

from __future__ import annotations

from harness.agents.contract import AgentContext, AgentRunner
from harness.benchmark import get, registered
from harness.errors import AgentError


class OracleRunner(AgentRunner):
    async def setup(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    async def turn(self, message: str) -> str:
        instance = self.ctx.instance
        benchmark = get(instance.benchmark)
        if benchmark.oracle is None:
            known = ", ".join(b.name for b in registered() if b.oracle is not None)
            raise AgentError(f"the oracle agent knows the benchmarks with an oracle ({known}); {instance.instance_id} "
                             f"is of {benchmark.name}, which has none")
        answer: str = await benchmark.oracle(self.ctx)
        return answer
