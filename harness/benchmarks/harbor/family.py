"""A Harbor task's verifier (environment.py), run in the sandbox once the agent's turns are over, for the instances
of the harbor dataset adapter (dataset.py); its reward is the benchmark's `verdict`, read by the harbor scorer.
No tools of its own: the agent works with the code family's.

The agent's turns get the task's [agent] timeout_sec: past it they end as a `wall_time` limit, and the verifier
runs all the same (as in Harbor 0.25), its verdict kept in the limited row. The agent process's own wall limit
(the instance's `timeout`) adds the verifier's seconds to it, and kills whatever does not stop when told."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from harness.benchmarks.harbor.artifacts import entries
from harness.benchmarks.harbor.environment import HarborEnv, prepare, verify
from harness.environments import Environments
from harness.environments.family import Setup, ToolFamily
from harness.errors import LimitExceeded

T = TypeVar("T")
NAME = "harbor"


class Harbor(ToolFamily[HarborEnv]):
    # No tools of its own; before mcp (90), so that its serve holds MCP's: each agent run (a multi-step task's
    # step) connects the task's servers afresh, and they are gone before its verifier runs
    name, order = "harbor", 85

    def offered(self, setup: Setup) -> bool:
        return setup.instance is not None and setup.instance.benchmark == NAME

    def build(self, setup: Setup, envs: Environments) -> HarborEnv | None:
        meta = setup.instance.metadata if setup.instance is not None else {}
        trace = setup.tracer.path
        return HarborEnv(setup.sandbox, Path(meta["task_dir"]), float(meta["agent_timeout"]),
                         float(meta["verifier_timeout"]), dict(meta.get("verifier_env") or {}),
                         steps=list(meta.get("harbor_steps") or []),
                         reward_strategy=meta.get("reward_strategy") or "mean",
                         separate=bool(meta.get("separate")), judge=setup.judge_sandbox,
                         bundled=bool(meta.get("verifier_image")),
                         artifacts=entries(list(meta.get("artifacts") or [])), declared=bool(meta.get("artifacts")),
                         collected=None if trace is None else trace.with_name(trace.stem + "-artifacts"))

    async def serve(self, setup: Setup, env: HarborEnv, envs: Environments, work: Callable[[], Awaitable[T]]) -> T:
        meta = setup.instance.metadata if setup.instance is not None else {}
        await asyncio.to_thread(prepare, env.sandbox, meta.get("healthcheck"))  # once, before the first agent run
        if env.steps:  # a multi-step task: each step its agent run and its verifier
            from harness.benchmarks.harbor.steps import run

            return await run(env, work)  # type: ignore[return-value]  # T is None: the agent's turns return none
        try:
            result = await asyncio.wait_for(work(), env.agent_timeout)
        except TimeoutError:
            # As Harbor 0.25 does (its single-step trial records the agent's timeout, then verifies): the verifier
            # runs, its artifacts are collected, and the row keeps the verdict beside its limit
            env.verdict = await asyncio.to_thread(verify, env)
            raise LimitExceeded("wall_time", f"the task's [agent] timeout_sec, {env.agent_timeout:g} s") from None
        env.verdict = await asyncio.to_thread(verify, env)
        return result


def verdict(envs: Environments) -> dict[str, Any] | None:
    """The verifier's reward (None: the agent's turns did not end, the verifier did not run)."""
    env = envs.of(Harbor)
    return env.verdict if env is not None else None
