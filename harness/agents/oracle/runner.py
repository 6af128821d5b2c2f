"""`--agent oracle`: each instance solved by its own reference actions, through the same tools an agent gets.
It must score 100 % on every well-formed instance: a run of it proves the dataset, the image and the judge
before anyone pays for a model. It dispatches on the instance's benchmark: a Gaia2 scenario's oracle actions
(gaia2.py), a Harbor task's solution/solve.sh (harbor.py); any other instance is the agent's error, said so. It
calls no model."""

from __future__ import annotations

import json

from harness.agents.contract import AgentContext, AgentRunner
from harness.errors import AgentError


class OracleRunner(AgentRunner):
    async def setup(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    async def turn(self, message: str) -> str:
        instance = self.ctx.instance
        benchmark = instance.metadata.get("benchmark")
        if benchmark == "harbor":
            from harness.agents.oracle.harbor import solve

            return f"<solution>{await solve(self.ctx.envs.code.sandbox, instance)}</solution>"
        return await self._gaia2()

    async def _gaia2(self) -> str:
        from harness.agents.oracle.gaia2 import play
        from harness.environments.families.gaia2 import Gaia2

        instance = self.ctx.instance
        env = self.ctx.envs.of(Gaia2)
        if env is None or instance.metadata.get("benchmark") != "gaia2":
            raise AgentError(f"the oracle agent knows Gaia2 scenarios and Harbor tasks only; {instance.instance_id} "
                             "is neither")
        tools = {tool.__name__: tool for tool in env.tools}

        async def call(name: str, arguments: dict) -> str:
            if name not in tools:
                raise AgentError(f"the scenario serves no tool {name!r} for its oracle action")
            result: str = await self.ctx.envs.guard(tools[name](**arguments))
            return result

        scenario = json.loads((instance.root / instance.metadata["scenario_file"]).read_text())
        await play(scenario, call, env.event)
        return "<solution>done</solution>"
