"""A Harbor task's oracle: its solution/ (a multi-step task's step: its steps/NAME/solution/ when it has one)
copied to /solution (as Harbor's oracle agent does) and /solution/solve.sh run as a program (its `#!` line chooses
the interpreter, as in Harbor) in the task's working directory with [solution] env, within the task's agent time.
What it leaves in the sandbox is then judged by the task's own verifier, like any agent's work."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness.agents.contract import AgentContext
from harness.benchmarks.harbor.environment import executed, place, workdir
from harness.datasets.model import Instance
from harness.errors import AgentError
from harness.sandbox.contract import Sandbox


async def solve(sandbox: Sandbox, instance: Instance, source: str = "solution") -> str:
    """`source`: the task folder's solution to run (a multi-step task's step has its own)."""
    meta = instance.metadata
    task_dir = Path(meta["task_dir"])
    if not (task_dir / source / "solve.sh").is_file():
        raise AgentError(f"the task {instance.instance_id} has no {source}/solve.sh for the oracle to run")
    if (problem := await asyncio.to_thread(place, sandbox, task_dir, source, "/solution")) is not None:
        raise AgentError(problem)
    ran = await asyncio.to_thread(sandbox.exec, executed("/solution/solve.sh"), timeout=float(meta["agent_timeout"]),
                                  cwd=workdir(sandbox), env=dict(meta.get("solution_env") or {}))
    return f"solve.sh ended with exit code {ran.exit_code}{' (timed out)' if ran.timed_out else ''}"


async def run(ctx: AgentContext) -> str:
    """`--agent oracle` on a Harbor task: its solve.sh, in the agent's sandbox."""
    from harness.benchmarks.harbor.family import Harbor
    from harness.benchmarks.harbor.steps import solution

    env = ctx.envs.of(Harbor)
    source = solution(env) if env is not None else "solution"
    return f"<solution>{await solve(ctx.envs.code.sandbox, ctx.instance, source)}</solution>"
