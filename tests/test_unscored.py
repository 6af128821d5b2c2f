"""Unscored instances: a target that is absent or a placeholder (`?`, GAIA's test split) is run,
answered and traced but never judged: correct null with a reason, no scorer called, counted as
unscored in report.json, the terminal and summary.csv, never an accuracy of 0% (real runs: replayed
model, real sandboxes)."""

from __future__ import annotations

import csv
import json

import pytest

from harness.report import build_report
from harness.results.model import ResultRow
from harness.scoring.apply import unscored_reason
from tests.helpers.e2e import SOLVE, containers_of, explain, harness, out_dir, rows, trace

pytestmark = pytest.mark.docker
IDS = ("t-1", "t-2", "t-3")


def replay_config(tmp_path, ids) -> object:
    replay = tmp_path / "turns.jsonl"
    replay.write_text("".join(json.dumps({"instance_id": i, "turns": SOLVE}) + "\n" for i in ids))
    config = tmp_path / "replay.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    return config


def test_a_test_split_with_placeholder_answers_is_run_and_reported_unscored_never_0_percent(tmp_path):
    split = tmp_path / "GAIA" / "2023" / "test"
    split.mkdir(parents=True)
    split.joinpath("metadata.jsonl").write_text("".join(json.dumps(
        {"task_id": i, "Question": "What is 6*7?", "Level": n, "Final answer": "?", "file_name": ""}) + "\n"
        for n, i in enumerate(IDS, start=1)))
    out = out_dir(tmp_path)
    proc = harness("run", "--dataset", tmp_path / "GAIA", "--split", "test", "--model", "rec",
                   "--config", replay_config(tmp_path, IDS), "--output-dir", out)
    print(proc.stdout, proc.stderr)  # the terminal report, kept in the test's output
    assert proc.returncode == 0, explain(proc)
    got = rows(out)
    assert sorted(r["instance_id"] for r in got) == sorted(IDS)
    for row in got:  # answered in the sandbox and traced, not judged
        assert row["answer"] == "42" and row["correct"] is None and row["scores"] == {}
        assert row["unscored"] == "the target is a placeholder ('?': the answers are private)"
        assert any(e["type"] == "env" and e["action"] == "run_python" for e in trace(out, row))
    report = json.loads((out / "report.json").read_text())
    assert (report["n_unscored"], report["n_judged"], report["n_no_verdict"]) == (3, 0, 0)
    assert sorted(report["ids"]["unscored"]) == sorted(IDS) and report["ids"]["failed"] == []
    assert all(b["unscored"] == 1 for b in report["per_level"].values())
    text = proc.stdout + proc.stderr
    assert "pass 0, unscored 3, errors 0" in text and "% of done" not in text
    assert "none judged  (3 of 3 unscored: no target)" in text
    assert "95% CI" not in text and "0.0%" not in text.split("accuracy", 1)[1].split("\n", 1)[0]
    assert "no verdict" not in text
    summary = next(csv.DictReader((tmp_path / "summary.csv").open()))
    assert summary["accuracy"] == "" and summary["n_unscored"] == "3"
    assert containers_of(out) == []
    rescored = harness("score", out)  # the one scoring path: a rescore judges none of them either
    assert rescored.returncode == 0, explain(rescored)
    assert all(r["correct"] is None and r["unscored"] for r in rows(out))


def test_a_mixed_dataset_reports_accuracy_over_the_scored_and_says_how_many_were_unscored(tmp_path):
    data = tmp_path / "tasks.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in (
        {"instance_id": "t-1", "question": "What is 6*7?", "answer": "42", "level": 1},
        {"instance_id": "t-2", "question": "What is 6*7?", "answer": "?", "level": 1},
        {"instance_id": "t-3", "question": "What is 6*7?", "level": 2})))
    out = out_dir(tmp_path)
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", replay_config(tmp_path, IDS),
                   "--output-dir", out)
    assert proc.returncode == 0, explain(proc)
    by_id = {r["instance_id"]: r for r in rows(out)}
    assert by_id["t-1"]["correct"] is True and by_id["t-1"]["unscored"] is None
    assert by_id["t-3"]["unscored"] == "no target" and by_id["t-3"]["correct"] is None
    report = json.loads((out / "report.json").read_text())
    assert (report["n_correct"], report["n_judged"], report["n_unscored"], report["accuracy"]) == (1, 1, 2, 1.0)
    assert report["per_level"]["1"] | {"ci95": None} == {"n": 2, "correct": 1, "accuracy": 1.0, "ci95": None,
                                                        "no_verdict": 0, "unscored": 1}
    table = " ".join(proc.stdout.replace("│", " ").split())  # the table's cells, unwrapped
    assert "1/1 = 100.0%" in table and "(2 of 3 unscored: no target)" in table, proc.stdout
    assert "95% CI" in table


@pytest.mark.parametrize(("target", "reason"), [
    (None, "no target"), ("  ", "no target"), (" ? ", "the target is a placeholder ('?': the answers are private)"),
    ("42", None), ("?!", None)])
def test_unscored_reason(target, reason):
    assert unscored_reason(target) == reason


def test_an_errored_unscored_instance_is_an_error_but_never_a_wrong_answer():
    rows_ = [ResultRow(instance_id="a", status="error", error_kind="agent", target="?", correct=None,
                       unscored="the target is a placeholder"),
             ResultRow(instance_id="b", status="ok", target="?", correct=None, unscored="the target is a placeholder")]
    report = build_report(rows_, ["a", "b"], leaked_containers=0)
    assert report.n_errors == 1 and report.n_judged == 0 and report.n_unscored == 2 and report.ids["errored"] == ["a"]
    assert report.missing_verdicts() is None


def test_a_test_split_run_stopped_before_some_instances_reports_none_judged_never_0_percent(tmp_path):
    """--max-cost stops the run after one instance: the two never run have no row to say they are
    unscored, yet they are (the run's tasks.json says so), never missing answers counted wrong."""
    split = tmp_path / "GAIA" / "2023" / "test"
    split.mkdir(parents=True)
    split.joinpath("metadata.jsonl").write_text("".join(json.dumps(
        {"task_id": i, "Question": "What is 6*7?", "Level": 1, "Final answer": "?", "file_name": ""}) + "\n"
        for i in IDS))
    turns = [{**turn, "usage": {"prompt_tokens": 1000, "completion_tokens": 0}} for turn in SOLVE]
    replay = tmp_path / "turns.jsonl"
    replay.write_text("".join(json.dumps({"instance_id": i, "turns": turns}) + "\n" for i in IDS))
    config = tmp_path / "replay.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\nprice_input_per_1k = 10.0\n'
                      'price_output_per_1k = 10.0\n')
    out = out_dir(tmp_path)
    proc = harness("run", "--dataset", tmp_path / "GAIA", "--split", "test", "--model", "rec", "--config", config,
                   "--max-cost", "1", "--workers", "1", "--output-dir", out)
    assert proc.returncode == 3, explain(proc)
    assert len(rows(out)) == 1, explain(proc)
    report = json.loads((out / "report.json").read_text())
    assert (report["n_judged"], report["n_unscored"], report["n_missing"]) == (0, 3, 2), report
    assert report["per_level"]["1"]["unscored"] == 3
    table = " ".join(proc.stdout.replace("│", " ").split())
    assert "none judged (3 of 3 unscored: no target)" in table and "0/2" not in table, proc.stdout
    assert "0.0%" not in table
    exported = harness("export", out, "--format", "jsonl", "--out", tmp_path / "rows.jsonl")
    assert exported.returncode == 0, explain(exported)
    assert all("label.unscored" not in line for line in rows_of(tmp_path / "rows.jsonl"))


def rows_of(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]
