"""An agent runner whose model call never returns and ignores every timeout (a blocking client
inside the event loop, so no deadline can fire): only the wall-clock kill ends it
(tests/faults/test_run_control.py)."""

from __future__ import annotations

import time

from harness.agents.contract import AgentContext, AgentRunner


async def _blocking_call() -> dict:
    time.sleep(3600)  # blocks the loop
    return {}


class StuckModelRunner(AgentRunner):
    async def setup(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    async def turn(self, message: str) -> str:
        await self.ctx.meter.call("stuck-model", _blocking_call, lambda reply: {"content": ""})
        return ""
