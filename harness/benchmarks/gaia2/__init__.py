"""Gaia2 (Meta's ARE): scenarios in simulated apps, the agent acting for a user; ARE's own judge, run in the
scenario's judge's sandbox (beside the agent's, out of its reach), passes or fails what the agent did. Three runs
of each scenario by default, as ARE's leaderboard; the agent ends with an action, not a text answer, so no
simulated user nudges it."""

from __future__ import annotations

from typing import Any

from harness.benchmark import Benchmark, Export, Figures, Words
from harness.benchmarks.gaia2 import dataset
from harness.benchmarks.gaia2.prompt import RULES, SYSTEM
from harness.benchmarks.gaia2.scorer import Gaia2Scorer

FAMILY = "harness.benchmarks.gaia2.family"


async def _oracle(ctx: Any) -> str:
    from harness.benchmarks.gaia2.oracle import run

    return await run(ctx)


def _verdict(envs: Any) -> dict[str, Any] | None:
    from harness.benchmarks.gaia2.family import verdict

    return verdict(envs)


def _verdict_after_kill(instance: Any, sandbox: Any, judge: Any, budget: Any) -> dict[str, Any] | None:
    from harness.benchmarks.gaia2.family import verdict_after_kill

    return verdict_after_kill(instance, sandbox, judge, budget)


def _record(sandbox: Any) -> tuple[str, bytes] | None:
    from harness.benchmarks.gaia2.record import record

    return record(sandbox)


def _metered(envs: Any, meter: Any) -> None:
    from harness.benchmarks.gaia2.family import metered

    metered(envs, meter)


def _refusal(instance: Any, model: Any) -> str | None:
    from harness.benchmarks.gaia2.family import refusal

    return refusal(instance, model)


def _applies(tasks: Any) -> bool:
    from harness.benchmarks.gaia2.report import applies

    return applies(tasks)


def _figures(*args: Any) -> dict[str, Any]:
    from harness.benchmarks.gaia2.report import figures

    return figures(*args)


def _lines(found: dict[str, Any]) -> list[tuple[str, str]]:
    from harness.benchmarks.gaia2.report import lines

    return lines(found)


def _warning(found: dict[str, Any]) -> str | None:
    from harness.benchmarks.gaia2.report import warning

    return warning(found)


def _leaderboard(run: Any, **options: Any) -> tuple[Any, list[str]]:
    from harness.benchmarks.gaia2.export import render

    return render(run, **options)


BENCHMARK = Benchmark(
    name=dataset.NAME, title="Gaia2", adapters=(dataset,), order=40, phases=dataset, image=dataset.IMAGE,
    scorers={"gaia2": Gaia2Scorer}, default_scorers=("gaia2",), judges=("gaia2",), epochs=dataset.EPOCHS,
    judge_sandbox=True,  # the scenario file holds the oracle's actions; ARE runs beside the agent, out of its reach
    conventions=RULES, system=SYSTEM, files_shown=False, user=False, oracle=_oracle, families=(FAMILY,),
    verdict=_verdict, verdict_after_kill=_verdict_after_kill, record=_record, refusal=_refusal, metered=_metered,
    words=Words(instances="scenarios", rate="success rate", correct="passed", wrong="failed", unjudged="not judged",
                groups="capability", target=""),
    figures=Figures(_applies, _figures, _lines, fields=("capability", "variant"), warning=_warning),
    exports={"gaia2": Export(_leaderboard, folder=True, options=("allow_hard_judge", "allow_few_epochs"))})
