"""`harness export`: a real run directory (the replay model on part of the smoke set, real sandboxes)
written as the GAIA submission, an Inspect AI log read back by inspect_ai, and flat JSON Lines;
the submission's validator refusing duplicates, unknown and missing ids (exit 2, naming them)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from harness.benchmarks.gaia.export import validate
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


def _atif_files(folder):
    """Every trajectory under `folder`, each checked with the published ATIF models (the `atif` package) and
    with the rules Harbor's own models add to them (checked against harbor 0.25.0's, docs/results.md#atif)."""
    import atif

    docs = {}
    for path in sorted(folder.rglob("*.json")):
        doc = json.loads(path.read_text())
        atif.Trajectory.model_validate(doc)
        assert doc["schema_version"] == "ATIF-v1.8" and doc["steps"], path
        assert doc["final_metrics"]["total_steps"] == len(doc["steps"])
        for step in doc["steps"]:
            ids = {c["tool_call_id"] for c in step.get("tool_calls", [])}
            for result in step.get("observation", {}).get("results", []):
                assert result.get("source_call_id") in ids | {None}, path
        docs[path.relative_to(folder).as_posix()] = doc
    return docs


@pytest.mark.docker
def test_atif_trajectories_of_a_smoke_run_validate_and_hold_the_trace(run_dir, tmp_path):
    out = tmp_path / "atif"
    proc = harness("export", run_dir, "--format", "atif", "--out", out)
    assert proc.returncode == 0, explain(proc)
    docs = _atif_files(out)
    rows = {r["instance_id"]: r for r in _lines(run_dir / "output.jsonl")}
    assert sorted(docs) == sorted(f"{rows[i]['trace'][len('traces/'):-len('.jsonl')]}/agent/trajectory.json"
                                  for i in IDS)  # one file per trial, where Harbor keeps a trial's trajectory
    for iid in IDS:
        row = rows[iid]
        doc = docs[f"{row['trace'][7:-6]}/agent/trajectory.json"]
        events = _lines(run_dir / row["trace"])
        steps = doc["steps"]
        assert [s["source"] for s in steps[:2]] == ["system", "user"] and steps[1]["message"].startswith(
            next(e["task"] for e in events if e["type"] == "task")[:100])
        calls = [c for s in steps for c in s.get("tool_calls", [])]
        assert [(c["function_name"], c["arguments"], c["tool_call_id"]) for c in calls] == [
            (e["name"], e["arguments"], e["call_id"]) for e in events if e["type"] == "tool_call"]
        results = [r for s in steps for r in s.get("observation", {}).get("results", [])]
        assert [(r["source_call_id"], r["content"]) for r in results] == [
            (e["call_id"], e["content"]) for e in events if e["type"] == "tool_result"]
        agent = [s for s in steps if s["source"] == "agent"]
        assert len(agent) == row["usage"]["llm_calls"] and all(s["model_name"] == "replay" and s["timestamp"]
                                                               for s in agent)
        metrics = doc["final_metrics"]
        assert sum(s["metrics"]["prompt_tokens"] for s in agent) == metrics["total_prompt_tokens"] == \
            row["usage"]["prompt_tokens"]
        assert sum(s["metrics"]["completion_tokens"] for s in agent) == metrics["total_completion_tokens"] == \
            row["usage"]["completion_tokens"]
        outcome = doc["extra"]["outcome"]
        assert (outcome["answer"], outcome["correct"], outcome["status"]) == (row["answer"], row["correct"], "ok")
        assert outcome["scores"]["gaia"]["correct"] is row["correct"]
        assert doc["agent"]["model_name"] == "replay" and doc["extra"]["trial"]["epoch"] == 1
        offered, = [e for e in events if e["type"] == "tools"]  # once per attempt, as the model was sent them
        assert doc["agent"]["tool_definitions"] == offered["tools"]
        names = [d["function"]["name"] for d in offered["tools"]]
        assert all(d["type"] == "function" and d["function"]["description"]
                   and d["function"]["parameters"]["type"] == "object" for d in offered["tools"])
        assert {"run_python", "read_file"} <= set(names) and len(names) == len(set(names))
        assert calls and {c["function_name"] for c in calls} <= set(names)
    assert [docs[f"{rows[i]['trace'][7:-6]}/agent/trajectory.json"]["extra"]["outcome"]["correct"]
            for i in IDS] == [True, True, False]


def _traced(run, events):
    """Give the hand-made run's first row a trace of `events`."""
    (run / "traces").mkdir()
    (run / "traces" / "q-1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    rows = _lines(run / "output.jsonl")
    rows[0].update(trace="traces/q-1.jsonl", usage={"prompt_tokens": 150, "completion_tokens": 30,
                                                    "cached_prompt_tokens": 40, "llm_calls": 3, "cost": 0.5},
                   status="error", error_kind="model", error="timed out")
    (run / "output.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_atif_carries_every_trace_event_and_names_what_it_could_not_write(tmp_path):
    """A team's messages, a tool result no call asked for, calls a reply asked for beyond those run, a simulated
    user's reply, an error and an event type of another harness version: all in the file (steps or extra); the
    second epoch, without a trace, and the tokens the trace lacks (a model call cut off) are warnings."""
    run = _hand_run(tmp_path, ["7", "8"])
    at = 1_800_000_000.0
    _traced(run, [
        {"t": 0.01, "type": "task", "task": "What is 3+4?"},
        {"t": 0.02, "type": "system_prompt", "source": "coder", "content": "You code."},
        {"t": 0.03, "type": "model_call_started", "model": "m", "timeout": 60, "at": at + 0.03},
        {"t": 0.04, "type": "model_wait", "model": "m", "status": 429, "seconds": 1.0, "retry": 1},
        {"t": 1.5, "type": "model_call", "model": "m", "seconds": 1.4, "content": "Let me add.",
         "usage": {"prompt_tokens": 100, "completion_tokens": 20, "cached_prompt_tokens": 40, "reasoning_tokens": 5},
         "tool_calls": [{"name": "add", "arguments": {"a": 3, "b": 4}}, {"name": "add", "arguments": {"a": 0}}]},
        {"t": 1.51, "type": "tool_calls_dropped", "model": "m", "asked": 2, "kept": 1, "dropped": 1},
        {"t": 1.52, "type": "tool_call", "source": "coder", "name": "add", "arguments": {"a": 3, "b": 4},
         "call_id": "c1"},
        {"t": 1.6, "type": "env", "env": "code", "action": "add", "outcome": "ok", "seconds": 0.05},
        {"t": 1.7, "type": "tool_result", "name": "add", "call_id": "c1", "content": "7"},
        {"t": 1.71, "type": "tool_result", "name": "stray", "call_id": "zz", "content": "boom", "is_error": True},
        {"t": 1.8, "type": "message", "source": "coder", "content": "Let me add."},
        {"t": 1.9, "type": "message", "source": "critic", "content": "Looks right."},
        {"t": 2.0, "type": "user_reply", "number": 1, "content": "Put it in <solution>."},
        {"t": 2.1, "type": "model_call_started", "model": "m", "timeout": 60, "at": at + 2.1},
        {"t": 2.5, "type": "model_call", "model": "m", "seconds": 0.4, "content": "<solution>7</solution>",
         "usage": {"prompt_tokens": 50, "completion_tokens": 5}},
        {"t": 2.6, "type": "model_call_started", "model": "m", "timeout": 60, "at": at + 2.6},
        {"t": 3.0, "type": "error", "kind": "model", "message": "timed out"},
        {"t": 3.1, "type": "sparkle", "what": "from a later harness"},
        {"t": 0, "type": "verdict", "status": "error", "answer": "7", "correct": None},
    ])
    out = tmp_path / "atif"
    proc = harness("export", run, "--format", "atif", "--out", out)
    assert proc.returncode == 0, explain(proc)
    (name, doc), = _atif_files(out).items()
    assert name == "q-1/agent/trajectory.json"
    assert "q (epoch 2): no trace" in proc.stderr and "'sparkle'" in proc.stderr
    assert "differ from the row's" in proc.stderr and "differ from the row's" in doc["notes"]
    assert "does not record the tools the agent was offered" in proc.stderr  # a trace from before the event
    assert "tool_definitions" not in doc["agent"]
    steps = doc["steps"]
    assert [(s["source"], s["message"]) for s in steps] == [
        ("system", "You code."), ("user", "What is 3+4?"), ("agent", "Let me add."), ("agent", "Looks right."),
        ("user", "Put it in <solution>."), ("agent", "<solution>7</solution>")]
    first = steps[2]
    assert first["tool_calls"] == [{"tool_call_id": "c1", "function_name": "add", "arguments": {"a": 3, "b": 4},
                                    "extra": {"agent": "coder"}}]
    assert first["observation"]["results"] == [
        {"source_call_id": "c1", "content": "7"},
        {"content": "boom", "extra": {"is_error": True, "call_id": "zz", "name": "stray"}}]
    assert first["metrics"] == {"prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 40,
                                "extra": {"reasoning_tokens": 5}}
    assert first["extra"]["tool_calls_not_run"] == [{"name": "add", "arguments": {"a": 0}}]
    assert first["extra"]["agent"] == "coder" and first["extra"]["model_wait"][0]["status"] == 429
    assert first["extra"]["tool_calls_dropped"][0]["dropped"] == 1 and first["extra"]["env_actions"][0]["env"] == "code"
    assert first["timestamp"].startswith("2027-01-15T08:00:00.03")
    assert steps[3]["extra"] == {"agent": "critic", "event": "message"}
    assert steps[4]["extra"] == {"user_reply": 1}
    assert [e["type"] for e in doc["extra"]["events"]] == ["error", "sparkle", "verdict", "model_call_started"]
    metrics = doc["final_metrics"]
    assert (metrics["total_prompt_tokens"], metrics["total_completion_tokens"], metrics["total_cached_tokens"],
            metrics["total_cost_usd"]) == (150, 25, 40, 0.5)
    outcome = doc["extra"]["outcome"]
    assert (outcome["status"], outcome["error_kind"], outcome["error"]) == ("error", "model", "timed out")


def test_atif_tool_definitions_are_the_traced_tools_a_team_member_by_member(tmp_path):
    run = _hand_run(tmp_path, ["7"])
    add = {"type": "function", "function": {"name": "add", "description": "Add two numbers.", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a"]}}}
    _traced(run, [
        {"t": 0.01, "type": "task", "task": "What is 3+4?"},
        {"t": 0.02, "type": "tools", "tools": [add], "agents": {"coder": ["add"]}},
        {"t": 1.5, "type": "model_call", "model": "m", "seconds": 1.4, "content": "<solution>7</solution>",
         "usage": {"prompt_tokens": 150, "completion_tokens": 30, "cached_prompt_tokens": 40}},
    ])
    proc = harness("export", run, "--format", "atif", "--out", tmp_path / "atif")
    assert proc.returncode == 0 and "record the tools" not in proc.stderr, explain(proc)
    (_, doc), = _atif_files(tmp_path / "atif").items()
    assert doc["agent"]["tool_definitions"] == [add] and doc["agent"]["extra"]["tools_by_agent"] == {"coder": ["add"]}
    assert [s["source"] for s in doc["steps"]] == ["user", "agent"] and not doc["extra"]["events"]


def test_atif_bad_out_is_exit_2_with_nothing_written(tmp_path):
    run = _hand_run(tmp_path, ["7"])
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    (tmp_path / "afile").write_text("x")
    for out, said in ((taken, "not an empty folder"), (tmp_path / "afile", "not an empty folder"),
                      (tmp_path / "t.json", "writes a folder"), (tmp_path / "no" / "such", "does not exist"),
                      (run / "traces" / "x", "the run's own")):
        proc = harness("export", run, "--format", "atif", "--out", out)
        assert proc.returncode == 2 and said in proc.stderr, explain(proc)
    assert [p.name for p in taken.iterdir()] == ["keep.txt"] and (tmp_path / "afile").read_text() == "x"
    assert not (tmp_path / "t.json").exists() and not (tmp_path / "no").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "hand", "taken"]  # no temporary folder left
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = harness("export", run, "--format", "atif", "--out", empty)  # a row without a trace: named, not a crash
    assert proc.returncode == 0 and "q (epoch 1): no trace" in proc.stderr, explain(proc)
    assert empty.is_dir() and not any(empty.iterdir())


def test_atif_folders_are_named_by_whitelist_never_outside_out(tmp_path):
    """A row's `trace` is data read from output.jsonl: `traces/...jsonl` (its stem `..`) put the trajectory beside
    --out, in its parent folder."""
    run = _hand_run(tmp_path, ["7"])
    _traced(run, [{"t": 0.01, "type": "task", "task": "What is 3+4?"},
                  {"t": 0.5, "type": "model_call", "model": "m", "content": "<solution>7</solution>"}])
    (run / "traces" / "q-1.jsonl").rename(run / "traces" / "...jsonl")
    rows = _lines(run / "output.jsonl")
    rows[0]["trace"] = "traces/...jsonl"
    (run / "output.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    parent = tmp_path / "exports"
    parent.mkdir()
    proc = harness("export", run, "--format", "atif", "--out", parent / "atif")
    assert proc.returncode == 0, explain(proc)
    assert [p.name for p in parent.iterdir()] == ["atif"]  # was: atif and agent/trajectory.json beside it
    assert list(_atif_files(parent / "atif")) == ["x/agent/trajectory.json"]
