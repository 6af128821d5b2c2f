"""A trivial agent for the agent-process tests (tests/test_agent_process.py): what it does is its
instance's metadata `do`.

    answer  one shell command in the sandbox, a message, then the answer <solution>4</solution>
    sleep   starts a `sleep 300` of its own (its pid in a message), then blocks: killed at a deadline
    exit    a word on stderr, then dies with exit code 3, writing no result
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from harness.agents.contract import AgentRunner
from harness.traces import Message


class Scripted(AgentRunner):
    async def setup(self, ctx) -> None:
        self.ctx = ctx

    async def turn(self, message: str) -> str:
        ctx, do = self.ctx, self.ctx.instance.metadata.get("do")
        if do == "answer":
            ctx.envs.code.run_shell("echo hi")
            ctx.tracer.emit(Message(source="scripted", content="said before answering"))
            return "<solution>4</solution>"
        if do == "sleep":
            helper = subprocess.Popen(["sleep", "300"])
            ctx.tracer.emit(Message(source="scripted", content=f"sleeping helper={helper.pid}"))
            time.sleep(300)
        if do == "exit":
            print("boom", file=sys.stderr, flush=True)
            os._exit(3)
        return f"unknown do={do!r}"
