"""Right without flags: each benchmark's own scorers judge it when --scorer is not given, a scorer that cannot judge a
benchmark is exit 2 before any container (naming the benchmark and the scorers that can), a dataset mixing
benchmarks whose defaults differ is refused without --scorer, and the simulated user nudges only the agents of
benchmarks that answer in text (runner/scorers.py `judging`, runner/agent_process/child.py `_drive`).
The oracle's 100 % with no flag on Gaia2 and Harbor: tests/test_gaia2_run.py, tests/test_harbor.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from harness.agents.contract import AgentResult, AgentRunner, UserSimulation
from harness.config import Scoring, TomlConfig
from harness.datasets.model import Instance
from harness.errors import InputError
from harness.report.build import build_report
from harness.report.output import end_lines, render
from harness.results.model import ResultRow
from harness.runner.agent_process.child import _drive
from harness.runner.scorers import judging
from tests.helpers.e2e import harness

ROOT = Path(__file__).resolve().parents[1]


def scoring(*names: str) -> Scoring:
    return Scoring.from_flags(list(names) or None, None, TomlConfig(None))


@pytest.mark.parametrize(("benchmark", "scorers"), [
    ("gaia2", ("gaia2",)), ("harbor", ("harbor",)), ("math500", ("math",)), ("multihoprag", ("multihoprag",)),
    ("gaia", ("gaia",)), ("custom", ("gaia",))])
def test_without_scorer_a_benchmark_is_judged_by_its_own(benchmark, scorers):
    assert judging(scoring(), {benchmark}).names == scorers  # before: gaia's for every one


def test_a_mixed_dataset_needs_scorer_unless_its_benchmarks_share_their_defaults():
    assert judging(scoring(), {"gaia", "custom"}).names == ("gaia",)
    with pytest.raises(InputError, match=r"mixes benchmarks .*custom: gaia; gaia2: gaia2.*--scorer"):
        judging(scoring(), {"gaia2", "custom"})
    assert judging(scoring("tool_calls"), {"gaia2", "custom"}).names == ("tool_calls",)  # clear for each


@pytest.mark.parametrize(("names", "benchmark", "says"), [
    (("gaia",), "harbor", "--scorer gaia cannot judge Harbor (harbor) instances; the scorers that can: budget, "
                          "harbor, tool_calls"),
    (("gaia2", "gaia"), "gaia2", "--scorer gaia cannot judge Gaia2 (gaia2) instances"),
    (("gaia2",), "custom", "--scorer gaia2 cannot judge a dataset of one's own (custom) instances; the scorers that "
                           "can: budget, exact, gaia, llm_judge, tool_calls"),
    (("harbor@0.5",), "math500", "--scorer harbor@0.5 cannot judge MATH-500"),
])
def test_a_scorer_that_cannot_judge_a_benchmark_is_refused_naming_those_that_can(names, benchmark, says):
    with pytest.raises(InputError) as caught:
        judging(scoring(*names), {benchmark})
    assert says in str(caught.value)


def test_checks_and_plug_ins_judge_any_benchmark():
    assert judging(scoring("harbor", "budget", "tool_calls:run_shell"), {"harbor"}).names[1:] == (
        "budget", "tool_calls:run_shell")
    assert judging(scoring("my.module:scorer"), {"gaia2"}).names == ("my.module:scorer",)


def test_the_cli_refuses_a_scorer_that_cannot_judge_before_any_container(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"instance_id": "a", "question": "Q?", "answer": "1"}) + "\n")
    for dataset, scorer, says in ((ROOT / "datasets" / "gaia2-smoke", "gaia", "cannot judge Gaia2 (gaia2)"),
                                  (data, "gaia2", "cannot judge a dataset of one's own (custom)")):
        out = tmp_path / f"out-{scorer}"
        proc = harness("run", "--dataset", dataset, "--agent", "oracle", "--scorer", scorer, "--output-dir", out)
        assert proc.returncode == 2, proc.stderr  # before: accepted (0 %, exit 0)
        assert says in proc.stderr and "the scorers that can" in proc.stderr, proc.stderr
        assert not (out / "run.json").exists()  # refused in the preflight, before anything is written or started


class Untagged(AgentRunner):
    """Ends every turn without <solution>, as a CLI agent that prints a summary does."""

    turns = 0

    async def setup(self, ctx) -> None:
        pass

    async def turn(self, message: str) -> str:
        self.turns += 1
        return "all done"


@pytest.mark.parametrize(("benchmark", "turns"), [("harbor", 1), ("gaia2", 1), ("custom", 4), ("gaia", 4)])
def test_the_simulated_user_answers_only_a_benchmark_that_asks_for_it(benchmark, turns):
    runner, result = Untagged(), AgentResult()
    instance = Instance(instance_id="t", question="Q?", root=Path("/tmp"), benchmark=benchmark)
    ctx = SimpleNamespace(tracer=SimpleNamespace(emit=lambda event: None), model=SimpleNamespace(kind="openai"))
    request = SimpleNamespace(task="Q?", instance=instance, user=UserSimulation())
    asyncio.run(_drive(runner, ctx, request.task, request, lambda message, instance, number: "carry on", result))
    assert runner.turns == turns and result.user_replies == turns - 1  # before: 4 turns on Harbor and Gaia2 too


def _row(iid: str, correct: bool | None, scorer: str, verdict: dict) -> ResultRow:
    score = {"scorer": scorer, "correct": correct, "value": float(bool(correct)),
             "explanation": "" if correct is not None else "scorer error: ScorerError: no reward"}
    return ResultRow(instance_id=iid, status="ok", correct=correct, target="pass", answer="done",
                     scores={scorer: score}, verdicts={scorer: verdict})


def _said(report) -> str:
    console = Console(width=200, record=True)
    console.print(render(report))
    return console.export_text() + "\n".join(end_lines(report))


def test_a_harbor_report_says_the_reward_and_the_verifiers_exit_code_and_output_of_each_failed_task():
    rows = [_row("ok", True, "harbor", {"reward": 1.0, "exit_code": 0, "output": "1 passed"}),
            _row("bad", False, "harbor", {"reward": 0.0, "exit_code": 1, "output": "E   assert 'bye' == 'hello'\n"
                                                                                   "1 failed"}),
            _row("broke", None, "harbor", {"error": "the verifier wrote no /logs/verifier/reward.txt",
                                           "exit_code": 127, "output": "test.sh: pytest: not found"})]
    tasks = {iid: {"benchmark": "harbor"} for iid in ("ok", "bad", "broke")}
    report = build_report(rows, ["ok", "bad", "broke"], leaked_containers=0, tasks=tasks)
    said = _said(report)
    assert (report.benchmark, report.words["wrong"]) == ("harbor", "failed")
    assert "solved (reward 1) (harbor)" in said and "failed (1): bad" in said  # before: "wrong answer (1): bad"
    assert "bad: reward 0; verifier exit code 1; output: …E assert 'bye' == 'hello' 1 failed" in said
    assert ("broke: no reward: the verifier wrote no /logs/verifier/reward.txt; verifier exit code 127; output: "
            "…test.sh: pytest: not found") in said  # before: the exit code and output were in the row alone
    assert "wrong answer" not in said and "level unknown" not in said


def test_a_gaia2_report_speaks_of_scenarios_passed_and_failed_never_of_levels_or_wrong_answers():
    rows = [_row("a", True, "gaia2", {"verdict": "pass"}), _row("b", False, "gaia2", {"verdict": "fail"})]
    tasks = {iid: {"benchmark": "gaia2", "capability": "execution", "variant": "standard"} for iid in "ab"}
    said = _said(build_report(rows, ["a", "b"], leaked_containers=0, tasks=tasks))
    assert "success rate (gaia2)" in said and "failed (1): b" in said
    assert "wrong answer" not in said and "level unknown" not in said  # before: both
    gaia = _said(build_report([_row("a", False, "gaia", {})], ["a"], leaked_containers=0, levels={"a": 1}))
    assert "accuracy (gaia)" in gaia and "wrong answer (1): a" in gaia and "level 1" in gaia  # GAIA's words stand
