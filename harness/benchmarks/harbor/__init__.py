"""Harbor (Terminal-Bench's task format): a task folder with its own image, instruction, verifier and solution;
the verifier's reward, run in the sandbox after the agent's turns, judges what the agent left there. The agent
ends by acting, not answering: no simulated user nudges it."""

from __future__ import annotations

from typing import Any

from harness.benchmark import Benchmark, Words
from harness.benchmarks.harbor import dataset
from harness.benchmarks.harbor.prompt import RULES
from harness.benchmarks.harbor.scorer import HarborScorer

FAMILY = "harness.benchmarks.harbor.family"


async def _oracle(ctx: Any) -> str:
    from harness.benchmarks.harbor.oracle import run

    return await run(ctx)


def _verdict(envs: Any) -> dict[str, Any] | None:
    from harness.benchmarks.harbor.family import verdict

    return verdict(envs)


BENCHMARK = Benchmark(
    name="harbor", title="Harbor", adapters=(dataset,), order=30, prefix="harbor", scorers={"harbor": HarborScorer},
    default_scorers=("harbor",), judges=("harbor",), conventions=RULES, user=False, oracle=_oracle,
    families=(FAMILY,), verdict=_verdict,
    words=Words(instances="tasks", rate="solved", correct="passed", wrong="failed", unjudged="not judged", groups="",
                target=""))
