"""Harbor (Terminal-Bench's task format): a task folder with its own image, instruction, verifier and solution;
the verifier's reward, run in the sandbox after the agent's turns, judges what the agent left there. The agent
ends by acting, not answering: no simulated user nudges it."""

from __future__ import annotations

from typing import Any

from harness.benchmark import Benchmark, Figures, Words
from harness.benchmarks.harbor import dataset
from harness.benchmarks.harbor.prompt import RULES, SYSTEM
from harness.benchmarks.harbor.scorer import HarborScorer

FAMILY = "harness.benchmarks.harbor.family"


async def _oracle(ctx: Any) -> str:
    from harness.benchmarks.harbor.oracle import run

    return await run(ctx)


def _verdict(envs: Any) -> dict[str, Any] | None:
    from harness.benchmarks.harbor.family import verdict

    return verdict(envs)


def _applies(tasks: Any) -> bool:
    from harness.benchmarks.harbor.report import applies

    return applies(tasks)


def _figures(latest: Any, selected: Any, *rest: Any) -> dict[str, Any]:
    """Harbor's reward means of a run with several reward keys (report.py), each step's figures of its multi-step
    tasks (steps.py)."""
    from harness.benchmarks.harbor import report, steps

    return {**report.figures(latest, selected, *rest), **steps.figures(latest, selected)}


def _lines(found: dict[str, Any]) -> list[tuple[str, str]]:
    from harness.benchmarks.harbor import report, steps

    return report.lines(found) + steps.lines(found)


def _explain(verdict: dict[str, Any]) -> str | None:
    """The verifier's reward, or why it gave none, its exit code and the tail of its output."""
    said = f"reward {verdict['reward']:g}" if "reward" in verdict else (
        f"rewards {verdict['rewards']}, none named reward" if verdict.get("rewards")
        else f"no reward: {verdict.get('error', '?')}")
    if verdict.get("steps"):  # a multi-step task: each step's reward, or why it has none
        said += f" ({verdict.get('strategy')} of steps: " + "; ".join(
            f"{step['name']} " + (f"{step['reward']:g}" if "reward" in step else f"no reward: {step.get('error')}")
            + (f", {step['stopped']}" if step.get("stopped") else "") for step in verdict["steps"]) + ")"
    tail = " ".join(str(verdict.get("output") or "").split())[-300:]
    return said + (f"; verifier exit code {verdict['exit_code']}" if verdict.get("exit_code") is not None else "") \
        + (f"; output: …{tail}" if tail else "")


BENCHMARK = Benchmark(
    writable_root=True,  # a task installs anywhere, as in Harbor's containers
    name="harbor", title="Harbor", adapters=(dataset,), order=30, prefix="harbor", scorers={"harbor": HarborScorer},
    default_scorers=("harbor",), judges=("harbor",), conventions=RULES, system=SYSTEM, user=False, oracle=_oracle,
    families=(FAMILY,), verdict=_verdict, explain=_explain, figures=Figures(_applies, _figures, _lines),
    words=Words(instances="tasks", rate="solved (reward 1)", correct="passed", wrong="failed", unjudged="not judged",
                groups="", target=""))
