"""Reporting as Gaia2 does (harness/report/gaia2.py): accuracy per capability and variant over the judged runs,
the capabilities' equal-weight mean, pass@K and pass^K over the epochs, cost and time per scenario; and Gaia2's
default of three epochs when --epochs is not given (runner/preflight.py default_epochs). Pure logic: rows made
here."""

from __future__ import annotations

from pathlib import Path
from statistics import stdev

import pytest
from rich.console import Console

from harness.config import RunConfiguration
from harness.datasets import load_dataset
from harness.report import render
from harness.report.build import build_report
from harness.results.model import ResultRow
from harness.runner.preflight import default_epochs
from harness.runner.run_config import RunConfig
from harness.usage import Usage

SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"
TASKS = {"e1": {"capability": "execution", "variant": "standard"}, "e2": {"capability": "execution",
         "variant": "standard"}, "s1": {"capability": "search", "variant": "agent2agent"}}


def row(iid: str, epoch: int, correct: bool | None, status: str = "ok") -> ResultRow:
    return ResultRow(instance_id=iid, epoch=epoch, status=status, correct=None if status == "error" else correct,
                     error_kind="agent" if status == "error" else None, duration_s=10.0 + epoch,
                     usage=Usage(cost=0.01, llm_calls=1),
                     scores={} if correct is None else {"gaia2": {"scorer": "gaia2", "correct": correct,
                                                                  "value": float(correct)}})


def rows() -> list[ResultRow]:
    """e1 passes thrice; e2 passes, fails, errors; s1 fails, is not judged (ARE gave no verdict), never ran a third."""
    return [row("e1", 1, True), row("e1", 2, True), row("e1", 3, True),
            row("e2", 1, True), row("e2", 2, False), row("e2", 3, None, status="error"),
            row("s1", 1, False), row("s1", 2, None)]


def test_gaia2s_figures_per_capability_variant_and_their_equal_weight_mean():
    report = build_report(rows(), ["e1", "e2", "s1"], leaked_containers=0, epochs=3, tasks=TASKS)
    found = report.gaia2
    assert found is not None and found["k"] == 3
    execution, search = found["capabilities"]["execution"], found["capabilities"]["search"]
    assert (execution["runs"], execution["judged_runs"], execution["passed_runs"], execution["errored_runs"]) == \
        (6, 6, 4, 1)  # the errored run is a run failed, as every harness figure counts it
    assert execution["accuracy"] == pytest.approx(4 / 6)
    assert (execution["judged_scenarios"], execution["pass_at_k"], execution["pass_hat_k"]) == (2, 1.0, 0.5)
    assert execution["cost_per_scenario"] == pytest.approx(0.03) and execution["time_per_run_s"] == pytest.approx(12)
    # search: the run without a verdict is left out and counted; the missing one is a run failed
    assert (search["runs"], search["judged_runs"], search["not_judged_runs"], search["missing_runs"]) == (3, 2, 1, 1)
    assert search["accuracy"] == 0.0 and search["judged_scenarios"] == 0 and search["pass_at_k"] is None
    head = found["headline"]
    assert head["accuracy"] == pytest.approx((4 / 6 + 0.0) / 2)  # each capability weighted equally, not 4/8
    assert head["capabilities"] == ["execution", "search"] and head["not_judged"] == []
    assert head["per_epoch"] == pytest.approx([0.5, 0.5, 0.25])  # epoch 2: search has no judged run, left out
    assert head["std_over_epochs"] == pytest.approx(stdev([0.5, 0.5, 0.25]))
    assert found["variants"]["agent2agent"]["not_judged_runs"] == 1
    assert found["variants"]["standard"] == {**execution}
    table = Console(width=250, record=True)
    table.print(render(report))
    shown = table.export_text()
    assert "Gaia2 (equal-weight mean)" in shown and "33.3%: the mean of 2 capabilities' accuracies" in shown
    assert "capability search" in shown and "1 NOT JUDGED (left out)" in shown and "pass^3 50.0%" in shown
    unpriced = build_report(rows(), ["e1", "e2", "s1"], leaked_containers=0, epochs=3, tasks=TASKS, priced=False)
    assert unpriced.gaia2 is not None and unpriced.gaia2["capabilities"]["execution"]["cost_per_scenario"] is None


def test_a_capability_with_nothing_judged_is_named_and_left_out_of_the_mean():
    report = build_report([row("e1", 1, True), row("s1", 1, None)], ["e1", "s1"], leaked_containers=0, tasks=TASKS)
    assert report.gaia2 is not None
    head = report.gaia2["headline"]
    assert head["accuracy"] == 1.0 and head["not_judged"] == ["search"] and head["std_over_epochs"] is None
    assert build_report([row("e1", 1, True)], ["e1"], leaked_containers=0, tasks={"e1": {"level": 1}}).gaia2 is None


def configuration(tmp_path: Path, epochs: int | None) -> RunConfiguration:
    return RunConfiguration.from_flags(
        dataset=SMOKE, model="replay", agent="oracle", scorers=["gaia2"], output={"dir": tmp_path / "out"},
        epochs={"count": 1 if epochs is None else epochs, "given": epochs is not None, "reducers": []})


def test_gaia2_runs_three_epochs_unless_told_and_run_json_says_why(tmp_path):
    dataset = load_dataset(SMOKE)
    defaulted = default_epochs(configuration(tmp_path, None), dataset)
    assert (defaulted.epochs.count, defaulted.epochs.default) == (3, "gaia2")
    told = default_epochs(configuration(tmp_path, 1), dataset)  # an explicit --epochs 1 stands
    assert (told.epochs.count, told.epochs.default) == (1, None)
    recorded = RunConfig.of(defaulted, dataset_fingerprint="f", image="i", model_settings={"name": "replay"},
                            website=None, prompt_template="default", run_id="r").to_json()
    assert recorded["epochs"] == 3 and recorded["epochs_default"] == "gaia2" and "dataset_subset" not in recorded
    plain = RunConfig.of(told, dataset_fingerprint="f", image="i", model_settings={"name": "replay"},
                         website=None, prompt_template="default", run_id="r").to_json()
    assert plain["epochs"] == 1 and "epochs_default" not in plain
