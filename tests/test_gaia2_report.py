"""Reporting as Gaia2 does (harness/benchmarks/gaia2/report.py): accuracy per capability and variant over the judged
runs, the capabilities' equal-weight mean, pass@K and pass^K over the epochs, cost and time per scenario; and Gaia2's
default of three epochs when --epochs is not given (runner/preflight.py default_epochs). Pure logic: rows made
here, and a run directory written by hand for `harness export --format gaia2`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from statistics import stdev

import pyarrow.parquet as pq
import pytest
import yaml
from rich.console import Console

from harness.benchmarks.gaia2.export import SCHEMA
from harness.config import RunConfiguration
from harness.datasets import load_dataset
from harness.report import render
from harness.report.build import build_report
from harness.report.output import end_lines
from harness.results.model import ResultRow
from harness.runner.preflight import default_epochs
from harness.runner.run_config import RunConfig
from harness.usage import Usage
from tests.helpers.e2e import explain, harness

SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"
PARQUET = "validation-00000-of-00001.parquet"
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
    found = report.figures["gaia2"]
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
    assert unpriced.figures["gaia2"]["capabilities"]["execution"]["cost_per_scenario"] is None


def test_a_capability_with_nothing_judged_is_named_and_left_out_of_the_mean():
    report = build_report([row("e1", 1, True), row("s1", 1, None)], ["e1", "s1"], leaked_containers=0, tasks=TASKS)
    assert report.figures["gaia2"] is not None
    head = report.figures["gaia2"]["headline"]
    assert head["accuracy"] == 1.0 and head["not_judged"] == ["search"] and head["std_over_epochs"] is None
    assert build_report([row("e1", 1, True)], ["e1"], leaked_containers=0, tasks={"e1": {"level": 1}}).figures == {}


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


def are_trace(iid: str, epoch: int) -> str:
    """What stands for ARE's exported trace of a run (the driver's, kept gzipped beside the run's trace)."""
    return json.dumps({"version": "are_simulation_v1", "metadata": {"definition": {"scenario_id": iid,
                                                                                   "run_number": epoch}}})


def hand_run(tmp_path: Path, judge: str = "llm", epochs: int = 3) -> Path:
    """A Gaia2 run directory written by hand: rows() with their verdicts (by ARE's `judge`) and a trace each,
    ARE's trace beside each but s1's second run's, tasks.json's labels; run.json says `epochs`."""
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"epochs": epochs, "epochs_default": "gaia2", "scorers": ["gaia2"],
                                              "model": "m", "dataset": "hf://x/gaia2", "reducers": ["mean"]}))
    (run / "selected.json").write_text(json.dumps(dict.fromkeys(TASKS)))
    (run / "tasks.json").write_text(json.dumps(TASKS))
    lines = []
    for found in rows():
        trace = f"traces/{found.instance_id}-{found.epoch}.jsonl"
        call = {"type": "tool_call", "name": "Emails__send_email", "arguments": {}}
        (run / trace).write_text(json.dumps(call) + "\n")
        if (found.instance_id, found.epoch) != ("s1", 2):
            beside = run / f"traces/{found.instance_id}-{found.epoch}.are.json.gz"
            beside.write_bytes(gzip.compress(are_trace(found.instance_id, found.epoch).encode()))
        verdict = {"verdict": "pass" if found.correct else "fail", "rationale": f"judged {found.instance_id}",
                   "judge": judge}
        lines.append(found.model_copy(update={"trace": trace, "error": "boom" if found.status == "error" else None,
                                              "verdicts": {"gaia2": verdict} if found.correct is not None else {}}))
    (run / "output.jsonl").write_text("".join(line.model_dump_json() + "\n" for line in lines))
    return run


def test_export_gaia2_writes_ares_leaderboard_folder(tmp_path):
    run, out = hand_run(tmp_path), tmp_path / "submission"
    proc = harness("export", run, "--format", "gaia2", "--out", out)
    assert proc.returncode == 0, explain(proc)
    assert "1 run(s) without a row left out: s1 epoch 3" in proc.stderr
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "README.md", "computed_stats.json", f"execution/{PARQUET}", f"search_a2a/{PARQUET}"]  # ARE's config names
    table = pq.read_table(out / "execution" / PARQUET)
    assert table.schema.names == SCHEMA.names
    got = table.to_pylist()
    assert [(r["scenario_id"], r["run_number"], r["status"], r["score"]) for r in got] == [
        ("e1", 1, "success", 1.0), ("e1", 2, "success", 1.0), ("e1", 3, "success", 1.0),
        ("e2", 1, "success", 1.0), ("e2", 2, "failed", 0.0), ("e2", 3, "exception", None)]
    errored = got[-1]
    assert errored["has_exception"] and (errored["exception_type"], errored["exception_message"]) == ("agent", "boom")
    assert (got[0]["config"], got[0]["phase_name"], got[0]["a2a_app_prop"], got[0]["rationale"]) == \
        ("execution", "standard", 0.0, "judged e1")
    # each row's data: ARE's trace of the run as kept (before: the harness's own JSON, which ARE cannot judge)
    assert [r["data"] for r in got] == [are_trace(r["scenario_id"], r["run_number"]) for r in got]
    assert "1 run(s) without ARE's trace (their `data` is null: ARE cannot re-judge them): s1 epoch 2" in proc.stderr
    assert json.loads(got[0]["run_config"])["epochs_default"] == "gaia2"
    search = pq.read_table(out / "search_a2a" / PARQUET).to_pylist()
    assert [(r["status"], r["phase_name"], r["a2a_app_prop"]) for r in search] == [
        ("failed", "agent2agent", 1.0), ("no_validation", "agent2agent", 1.0)]
    assert [r["data"] for r in search] == [are_trace("s1", 1), None]
    stats = json.loads((out / "computed_stats.json").read_text())["statistics"]
    assert stats["per_capability"]["execution"]["success_rate"] == pytest.approx(400 / 6)
    assert stats["per_capability"]["search_a2a"]["no_validation_runs"] == 1
    assert stats["global"]["macro_success_rate"] == pytest.approx((400 / 6 + 0) / 2)
    card = (out / "README.md").read_text()
    assert card.startswith("---\nconfigs:\n- config_name: execution\n  data_files:\n  - split: validation\n"
                           "    path: execution/validation-*\n") and "- config_name: search_a2a" in card

    again = harness("export", run, "--format", "gaia2", "--out", out)  # never over a folder there
    assert again.returncode == 2 and "is not an empty folder" in again.stderr, explain(again)
    (run / "tasks.json").write_text(json.dumps({"e1": {"level": 1}}))
    other = harness("export", run, "--format", "gaia2", "--out", tmp_path / "other")
    assert other.returncode == 2 and "is not a Gaia2 run" in other.stderr and not (tmp_path / "other").exists()


def test_export_gaia2_names_configs_by_whitelist_and_writes_its_yaml_with_a_yaml_writer(tmp_path):
    """A scenario's tag is its capability (benchmarks/gaia2/dataset.py), data of the scenario's author: the tag
    `../../escaped` wrote a config folder outside --out, and a tag with a newline added a config to the card's YAML."""
    scenario = json.loads((SMOKE / "proto_find_image_file.json").read_text())
    scenario["metadata"]["definition"]["tags"] = ["../../escaped"]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "s.json").write_text(json.dumps(scenario))
    assert load_dataset(tmp_path / "data").instances[0].metadata["capability"] == "../../escaped"
    run = hand_run(tmp_path)
    injected = "x\n- config_name: injected\n  data_files: []"
    (run / "tasks.json").write_text(json.dumps({"e1": {"capability": "../../escaped", "variant": "standard"},
                                                "e2": {"capability": injected, "variant": "standard"},
                                                "s1": {"capability": "search", "variant": "../../odd"}}))
    (tmp_path / "exports").mkdir()
    out = tmp_path / "exports" / "submission"
    proc = harness("export", run, "--format", "gaia2", "--out", out)
    assert proc.returncode == 0, explain(proc)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "exports", "run"]  # was: escaped/ beside them
    assert [p.name for p in (tmp_path / "exports").iterdir()] == ["submission"]
    names = ["escaped", "x---config_name-injected-data_files", "search_odd"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(names)
    front = yaml.safe_load((out / "README.md").read_text().split("---\n")[1])
    assert [c["config_name"] for c in front["configs"]] == names  # no config added
    assert [c["config_name"] for c in front["dataset_info"]] == names
    assert front["configs"][0]["data_files"] == [{"split": "validation", "path": "escaped/validation-*"}]
    assert [f["name"] for f in front["dataset_info"][0]["features"]] == SCHEMA.names


def judged_by(judge: str) -> list[ResultRow]:
    return [r.model_copy(update={"verdicts": {"gaia2": {"verdict": "pass" if r.correct else "fail", "judge": judge}}
                                 if r.correct is not None else {}}) for r in rows()]


def test_a_run_judged_without_a_judge_model_says_its_figures_are_not_comparable_to_ares_leaderboard():
    """ARE's runner always judges with an LLM (its gaia2-run and gaia2-submit default --judge_model): the scripted
    checks alone never compare a message's text, and report.json, the table and the lines after it say so."""
    hard = build_report(judged_by("hard"), ["e1", "e2", "s1"], leaked_containers=0, epochs=3, tasks=TASKS)
    judge = hard.figures["gaia2"]["judge"]
    assert (judge["hard_runs"], judge["llm_runs"]) == (6, 0), judge  # the judged runs: e1 x3, e2 x2, s1 x1
    assert "message texts were not compared" in judge["warning"] and "not comparable to ARE's leaderboard" in \
        judge["warning"]
    table = Console(width=400, record=True)
    table.print(render(hard))
    shown = table.export_text()
    assert "Gaia2 judge" in shown and "not comparable to ARE's leaderboard" in shown
    assert f"warning: {judge['warning']}" in end_lines(hard)
    soft = build_report(judged_by("llm"), ["e1", "e2", "s1"], leaked_containers=0, epochs=3, tasks=TASKS)
    assert soft.figures["gaia2"]["judge"] == {"llm_runs": 6, "hard_runs": 0, "warning": None}
    assert not any("comparable" in line for line in end_lines(soft))


def test_export_gaia2_refuses_a_hard_judged_or_one_epoch_run_unless_told(tmp_path):
    hard = hand_run(tmp_path / "hard", judge="hard")
    refused = harness("export", hard, "--format", "gaia2", "--out", tmp_path / "a")
    assert refused.returncode == 2 and "--allow-hard-judge" in refused.stderr, explain(refused)
    assert "message texts were not compared" in refused.stderr and not (tmp_path / "a").exists()
    told = harness("export", hard, "--format", "gaia2", "--out", tmp_path / "a", "--allow-hard-judge")
    assert told.returncode == 0 and "not comparable to ARE's leaderboard" in told.stderr, explain(told)
    assert "**Not comparable to ARE's leaderboard:**" in (tmp_path / "a" / "README.md").read_text()
    meta = json.loads((tmp_path / "a" / "computed_stats.json").read_text())["metadata"]
    assert len(meta["not_comparable"]) == 1 and "message texts" in meta["not_comparable"][0]

    once = hand_run(tmp_path / "once", epochs=1)
    refused = harness("export", once, "--format", "gaia2", "--out", tmp_path / "b")
    assert refused.returncode == 2 and "--allow-few-epochs" in refused.stderr, explain(refused)
    assert "takes 3 runs per scenario" in refused.stderr and not (tmp_path / "b").exists()
    told = harness("export", once, "--format", "gaia2", "--out", tmp_path / "b", "--allow-few-epochs")
    assert told.returncode == 0, explain(told)
    assert json.loads((tmp_path / "b" / "computed_stats.json").read_text())["metadata"]["not_comparable"]

    both = hand_run(tmp_path / "both", judge="hard", epochs=1)  # each reason named, each flag needed
    refused = harness("export", both, "--format", "gaia2", "--out", tmp_path / "c", "--allow-hard-judge")
    assert refused.returncode == 2 and "--allow-few-epochs" in refused.stderr, explain(refused)
    assert "--allow-hard-judge)" not in refused.stderr and not (tmp_path / "c").exists()
    other = harness("export", hard, "--format", "jsonl", "--out", tmp_path / "d.jsonl", "--allow-hard-judge")
    assert other.returncode == 2 and "applies to --format gaia2 only" in other.stderr, explain(other)
