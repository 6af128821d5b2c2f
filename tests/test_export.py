"""`harness export`: a real run directory (the replay model on part of the smoke set, real sandboxes)
written as the GAIA submission, an Inspect AI log read back by inspect_ai, and flat JSON Lines;
the submission's validator refusing duplicates, unknown and missing ids (exit 2, naming them)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from harness.export.gaia import validate
from tests.helpers.e2e import REPO, explain, harness

SMOKE = REPO / "datasets" / "gaia-smoke"
IDS = ["e2509efa-62fd-5994-b70b-e04e13ddc56c", "c4eea2af-0a09-5074-981e-18781a06799d",
       "964d85c4-677b-56b1-946d-d39b4af02e50"]  # two right, one wrong (level 3)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "run"
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--output-dir", out, "--ids", ",".join(IDS),
                   "--workers", 2)
    assert proc.returncode == 0, explain(proc)
    return out


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.docker
def test_gaia_submission_has_one_answer_and_trace_per_selected_task(run_dir, tmp_path):
    out = tmp_path / "submission.jsonl"
    proc = harness("export", run_dir, "--format", "gaia", "--out", out, "--allow-partial")  # 3 of the smoke set
    assert proc.returncode == 0, explain(proc)
    assert "partial leaderboard file" in proc.stderr
    lines = _lines(out)
    assert [line["task_id"] for line in lines] == IDS
    for line in lines:  # the leaderboard's format: these keys, all strings
        assert set(line) == {"task_id", "model_answer", "reasoning_trace"}
        assert all(isinstance(v, str) for v in line.values())
        assert len(line["reasoning_trace"]) <= 20_000 + 200
    assert lines[0]["model_answer"] == "Oliver Brandt"
    assert "[tool run_python]" in lines[0]["reasoning_trace"]
    assert validate(lines, IDS) == ([], [])


@pytest.mark.docker
def test_gaia_export_refuses_missing_ids_and_warns_of_unanswered(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    rows = _lines(copy / "output.jsonl")
    next(r for r in rows if r["instance_id"] == IDS[1]).update(status="error", error_kind="agent", error="boom",
                                                                answer=None, correct=False)
    (copy / "output.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["instance_id"] != IDS[2]))
    out = tmp_path / "s.jsonl"
    refused = harness("export", copy, "--format", "gaia", "--out", out)
    assert refused.returncode == 2, explain(refused)
    assert IDS[2] in refused.stderr and "--allow-missing" in refused.stderr
    assert not out.exists()
    allowed = harness("export", copy, "--format", "gaia", "--out", out, "--allow-missing", "--allow-partial")
    assert allowed.returncode == 0, explain(allowed)
    lines = _lines(out)
    assert [line["task_id"] for line in lines] == IDS[:2]
    assert lines[1]["model_answer"] == ""
    assert IDS[1] in allowed.stderr and "without an answer" in allowed.stderr
    assert IDS[2] in allowed.stderr


@pytest.mark.docker
def test_inspect_log_reads_back_with_inspect_ai(run_dir, tmp_path):
    from inspect_ai.log import read_eval_log

    out = tmp_path / "log.json"
    proc = harness("export", run_dir, "--format", "inspect", "--out", out)
    assert proc.returncode == 0, explain(proc)
    log = read_eval_log(str(out))
    assert log.status == "success" and log.eval.model == "replay" and log.eval.task == "gaia-smoke"
    assert [s.id for s in log.samples] == IDS
    first, wrong = log.samples[0], log.samples[2]
    assert first.scores["gaia"].value == 1.0 and first.scores["gaia"].metadata == {"correct": True}
    assert wrong.scores["gaia"].value == 0.0
    assert first.output.completion == "Oliver Brandt" and first.target == "Oliver Brandt"
    roles = [m.role for m in first.messages]
    assert roles[:2] == ["system", "user"] and "tool" in roles and roles[-1] == "assistant"
    call = next(m for m in first.messages if m.role == "assistant" and m.tool_calls).tool_calls[0]
    result = next(m for m in first.messages if m.role == "tool")
    assert result.tool_call_id == call.id and call.function == "list_files"
    assert first.model_usage["replay"].total_tokens > 0 and first.total_time > 0 and first.started_at
    accuracy = log.results.scores[0].metrics["accuracy"].value
    assert log.results.scores[0].name == "gaia" and accuracy == pytest.approx(2 / 3)


@pytest.mark.docker
def test_jsonl_export_is_one_flat_row_per_instance_for_pandas(run_dir, tmp_path):
    out = tmp_path / "rows.jsonl"
    proc = harness("export", run_dir, "--format", "jsonl", "--out", out)
    assert proc.returncode == 0, explain(proc)
    frame = pd.read_json(out, lines=True, dtype=False)
    assert list(frame["instance_id"]) == IDS
    assert list(frame["correct"]) == [True, True, False]
    assert list(frame["score.gaia.correct"]) == [True, True, False]
    assert list(frame["level"]) == ["1", "1", "3"]
    assert (frame["total_tokens"] == frame["prompt_tokens"] + frame["completion_tokens"]).all()
    assert frame["answer"][0] == "Oliver Brandt" and "cost" in frame
    assert frame["steps"][0] == 3 and frame["label.steps"][0] == "4-6"  # model calls; GAIA's steps bucket
    assert frame["label.tool_family"][0] == "coding; file types"


def test_validator_names_duplicates_unknown_missing_and_malformed_lines():
    good = {"task_id": "a", "model_answer": "1"}
    problems, missing = validate([good, dict(good), {"task_id": "z", "model_answer": "2"},
                                  {"task_id": "b", "model_answer": 3}, {"task_id": "c"}], ["a", "b", "c", "d"])
    assert missing == ["d"]
    assert any("duplicate task_id: a" in p for p in problems)
    assert any("not in the run's selection: z" in p for p in problems)
    assert any(p.startswith("line 4:") for p in problems) and any(p.startswith("line 5:") for p in problems)


def _hand_run(tmp_path, epochs_answers, reducers=("mean",)):
    """A run directory written by hand: one instance 'q' with the given answers per epoch."""
    run = tmp_path / "hand"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"epochs": len(epochs_answers), "reducers": list(reducers),
                                              "scorers": ["gaia"], "model": "m", "dataset": "d"}))
    (run / "selected.json").write_text(json.dumps({"q": 1}))
    rows = [{"instance_id": "q", "epoch": e, "status": "ok", "answer": a, "correct": a == "7",
             "scores": {"gaia": {"correct": a == "7", "value": float(a == "7")}}}
            for e, a in enumerate(epochs_answers, 1)]
    (run / "output.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


@pytest.mark.parametrize("reducer", ["majority", "mean", "pass@1"])
def test_epochs_submit_the_modal_answer_whatever_the_first_reducer(tmp_path, reducer):
    run = _hand_run(tmp_path, ["8", "7", " 7.", "9"], reducers=(reducer,))
    out = tmp_path / "s.jsonl"
    proc = harness("export", run, "--format", "gaia", "--out", out)
    assert proc.returncode == 0, explain(proc)
    assert [(line["task_id"], line["model_answer"]) for line in _lines(out)] == [("q", "7")]


def test_jsonl_export_has_the_token_classes_the_judges_usage_and_why_a_row_is_unscored(tmp_path):
    """Before, a line had the prompt and completion tokens and the agent's cost only: cached, cache-write
    and reasoning tokens, cache hits and the LLM judge's calls and cost were in the row but not exported."""
    run = _hand_run(tmp_path, ["7", "8"])
    lines = [json.loads(line) for line in (run / "output.jsonl").read_text().splitlines()]
    lines[0].update(usage={"prompt_tokens": 900, "completion_tokens": 100, "cached_prompt_tokens": 600,
                           "cache_write_tokens": 50, "reasoning_tokens": 40, "llm_calls": 3, "cache_hits": 1,
                           "cost": 0.25},
                    judge_usage={"prompt_tokens": 70, "completion_tokens": 5, "llm_calls": 1, "cost": 0.01})
    lines[1].update(correct=None, scores={}, unscored="no target")
    (run / "output.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "rows.jsonl"
    proc = harness("export", run, "--format", "jsonl", "--out", out)
    assert proc.returncode == 0, explain(proc)
    first, second = _lines(out)
    assert {k: first[k] for k in ("prompt_tokens", "cached_prompt_tokens", "cache_write_tokens", "reasoning_tokens",
                                  "total_tokens", "llm_calls", "cache_hits", "cost")} == {
        "prompt_tokens": 900, "cached_prompt_tokens": 600, "cache_write_tokens": 50, "reasoning_tokens": 40,
        "total_tokens": 1000, "llm_calls": 3, "cache_hits": 1, "cost": 0.25}
    assert (first["judge_calls"], first["judge_tokens"], first["judge_cost"]) == (1, 75, 0.01)
    assert first["unscored"] is None and second["unscored"] == "no target" and second["correct"] is None
    assert (second["judge_calls"], second["cached_prompt_tokens"]) == (0, 0) and set(first) == set(second)


def test_bad_format_and_inspect_suffix_exit_2(tmp_path):
    run = _hand_run(tmp_path, ["7"])
    bad = harness("export", run, "--format", "csv", "--out", tmp_path / "x")
    assert bad.returncode == 2 and "--format 'csv'" in bad.stderr
    suffix = harness("export", run, "--format", "inspect", "--out", tmp_path / "log.eval")
    assert suffix.returncode == 2 and ".json" in suffix.stderr
    nodir = harness("export", tmp_path / "nothing", "--format", "jsonl", "--out", tmp_path / "x.jsonl")
    assert nodir.returncode == 2 and "not a run output directory" in nodir.stderr


@pytest.mark.docker
@pytest.mark.parametrize("name", ["output.jsonl", "run.json", "report.json", "tasks.json", "../summary.csv"])
def test_export_never_writes_over_the_runs_own_files(run_dir, tmp_path, name):
    copy = tmp_path / "runs" / "run"
    shutil.copytree(run_dir, copy)
    (copy.parent / "summary.csv").write_text("kept\n")
    target = copy / name
    before = target.read_bytes()
    proc = harness("export", copy, "--format", "jsonl", "--out", target)
    assert proc.returncode == 2, explain(proc)
    assert "--out" in proc.stderr and "the run's own" in proc.stderr, explain(proc)
    assert target.read_bytes() == before
    beside = harness("export", copy, "--format", "jsonl", "--out", copy / "rows.jsonl")  # a file of its own there
    assert beside.returncode == 0, explain(beside)
