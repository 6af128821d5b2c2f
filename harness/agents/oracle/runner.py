"""`--agent oracle`: each instance solved by its own reference actions, through the same tools an agent gets.
It must score 100 % on every well-formed instance: a run of it proves the dataset, the image and the judge
before anyone pays for a model. Gaia2 scenarios today (gaia2.py: the scenario's oracle actions); any other
instance is the agent's error, said so. It calls no model."""

from __future__ import annotations

import json

from harness.agents.contract import AgentContext, AgentRunner
from harness.errors import AgentError


class OracleRunner(AgentRunner):
    async def setup(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    async def turn(self, message: str) -> str:
        from harness.agents.oracle.gaia2 import play
        from harness.environments.families.gaia2 import Gaia2

        instance = self.ctx.instance
        env = self.ctx.envs.of(Gaia2)
        if env is None or instance.metadata.get("benchmark") != "gaia2":
            raise AgentError(f"the oracle agent knows Gaia2 scenarios only; {instance.instance_id} is not one")
        tools = {tool.__name__: tool for tool in env.tools}

        async def call(name: str, arguments: dict) -> str:
            if name not in tools:
                raise AgentError(f"the scenario serves no tool {name!r} for its oracle action")
            result: str = await self.ctx.envs.guard(tools[name](**arguments))
            return result

        scenario = json.loads((instance.root / instance.metadata["scenario_file"]).read_text())
        await play(scenario, call, env.event)
        return "<solution>done</solution>"
