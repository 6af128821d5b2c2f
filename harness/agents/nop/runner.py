"""`--agent nop`: does nothing and answers nothing, as Harbor's `nop` agent. It calls no model and touches no tool, so
a run of it says what an instance scores with no work done: a verifier that passes it checks nothing (the
differential test against Harbor's runner, tests/test_harbor_parity.py, runs it beside Harbor's `nop`)."""

from __future__ import annotations

from harness.agents.contract import AgentContext, AgentRunner


class NopRunner(AgentRunner):
    async def setup(self, ctx: AgentContext) -> None:
        return None

    async def turn(self, message: str) -> str:
        return ""
