"""Gaia2 end to end: `harness run` on datasets/gaia2-smoke in real gaia2 sandboxes. The oracle agent (each
scenario's own actions through the scenario's tools) passes ARE's judge on all three, the two-turn one included,
three times each (Gaia2's default epochs), reported as Gaia2 reports; an agent that does nothing (the plain runner
over the smoke set's replayed model) fails all three with ARE's reasons; `harness score` reaches the same verdicts
from the rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.benchmarks.gaia2.scorer import Gaia2Scorer
from harness.scoring.apply import score_row
from harness.scoring.base import ScoreContext
from tests.helpers.e2e import explain, harness, rows

SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"
IDS = ["proto_find_image_file", "proto_forward_email", "proto_multi_turn"]


@pytest.mark.docker
def test_the_oracle_passes_every_smoke_scenario_and_an_idle_agent_fails_each_with_ares_reason(tmp_path):
    # The natural command, no --scorer, --model or --epochs: Gaia2's own scorer (before: GAIA's, 0 %, exit 0) and
    # its three epochs.
    oracle = harness("run", "--dataset", SMOKE, "--agent", "oracle", "--workers", "3", "--output-dir",
                     tmp_path / "oracle")
    assert oracle.returncode == 0, explain(oracle)
    assert "gaia2: each instance runs 3 times" in oracle.stderr, explain(oracle)
    run = json.loads((tmp_path / "oracle" / "run.json").read_text())
    assert (run["epochs"], run["epochs_default"], run["scorers"]) == (3, "gaia2", ["gaia2"])
    every = rows(tmp_path / "oracle")
    assert sorted((r["instance_id"], r["epoch"]) for r in every) == [(i, e) for i in IDS for e in (1, 2, 3)]
    got = {r["instance_id"]: r for r in every}
    assert all(r["correct"] is True for r in every), explain(oracle)
    assert all(a["matched"] for r in every for a in r["verdicts"]["gaia2"]["oracle_actions"])
    assert got["proto_multi_turn"]["verdicts"]["gaia2"]["turns_done"] == 2
    report = json.loads((tmp_path / "oracle" / "report.json").read_text())  # accuracy per Gaia2 capability
    assert sorted(report["breakdowns"]["capability"]) == ["adaptability", "execution", "search"], report["breakdowns"]
    figures = report["figures"]["gaia2"]  # as Gaia2 reports: the capabilities' equal-weight mean, pass@3 and pass^3
    assert figures["k"] == 3 and figures["headline"]["accuracy"] == 1.0
    assert all((c["accuracy"], c["pass_at_k"], c["pass_hat_k"], c["runs"]) == (1.0, 1.0, 1.0, 3)
               for c in figures["capabilities"].values()), figures

    idle = harness("run", "--dataset", SMOKE, "--agent", "plain", "--model", "replay", "--scorer", "gaia2",
                   "--epochs", "1", "--output-dir", tmp_path / "idle")  # an explicit --epochs 1 stands
    assert idle.returncode == 0, explain(idle)  # wrong answers are the agent's result, not the run's failure
    failed = {r["instance_id"]: r for r in rows(tmp_path / "idle")}
    assert sorted(failed) == IDS and all(r["status"] == "ok" and r["correct"] is False for r in failed.values())
    assert json.loads((tmp_path / "idle" / "run.json").read_text())["epochs"] == 1
    assert all(r["verdicts"]["gaia2"]["verdict"] == "fail" and r["scores"]["gaia2"]["explanation"]
               for r in failed.values())
    # Its agent gets the scenario's apps alone (metadata tool_families): the replay's run_shell is no tool there.
    trace = tmp_path / "idle" / failed["proto_find_image_file"]["trace"]
    refusal = next(e["content"] for e in map(json.loads, trace.read_text().splitlines())
                   if e.get("type") == "tool_result" and e.get("name") == "run_shell")
    offered = refusal.split("the tools are ", 1)[1].split(", ")
    assert refusal.startswith("Error: no tool named 'run_shell'")
    assert "AgentUserInterface__send_message_to_user" in offered
    assert all("__" in name for name in offered), offered  # ARE's App__function names, no code/file/browser tool
    # Prompted in ARE's terms (Benchmark.system, its conventions): its apps and the user, no files, no answer tag
    events = list(map(json.loads, trace.read_text().splitlines()))
    system = next(e["content"] for e in events if e.get("type") == "system_prompt")
    task = next(e for e in events if e.get("type") == "task")
    for text in (system, json.dumps(task)):
        assert "<solution>" not in text and "/workspace" not in text, text
    assert "send_message_to_user" in system and "apps" in system, system

    again = harness("score", tmp_path / "oracle")  # from the rows' verdicts alone, by the run's own scorers
    assert again.returncode == 0, explain(again)
    assert all(r["correct"] is True for r in rows(tmp_path / "oracle"))


@pytest.mark.parametrize("verdict, correct", [
    ({"verdict": "pass", "rationale": "", "oracle_actions": [{"matched": True}]}, True),
    ({"verdict": "fail", "rationale": "Oracle sent 1 more message(s) than agent.", "oracle_actions": []}, False),
    ({"verdict": "error", "error": "the judge raised LLMEngineException"}, None),  # not judged: never wrong
    (None, None),  # no verdict came back
])
def test_the_gaia2_scorer_reads_ares_verdict_and_needs_no_answer(verdict, correct):
    context = ScoreContext(verdicts={"gaia2": verdict} if verdict else {})
    scores, got = score_row(None, "pass", [Gaia2Scorer()], context)  # no answer: the run's actions are judged
    assert got is correct, scores
    if correct is None:
        assert scores["gaia2"]["explanation"].startswith("scorer error: ScorerError")


def _forward(tmp_path: Path, mode: str) -> dict:
    """proto_forward_email run by the scripted agent (tests/helpers/gaia2_agents.py) going wrong as `mode` says."""
    data = tmp_path / mode / "data"
    data.mkdir(parents=True)
    (data / "proto_forward_email.json").write_text((SMOKE / "proto_forward_email.json").read_text())
    (data / "replay.jsonl").write_text('{"instance_id": "proto_forward_email", "turns": [{"content": "unused"}]}\n')
    proc = harness("run", "--dataset", data, "--agent", "tests.helpers.gaia2_agents:Forwarder", "--model", "replay",
                   "--scorer", "gaia2", "--output-dir", tmp_path / mode / "run", "--max-retries", "0", "--epochs", "1",
                   env={"HARNESS_TEST_GAIA2": mode})
    (row,) = rows(tmp_path / mode / "run")
    row["returncode"], row["trace_events"] = proc.returncode, [
        json.loads(line) for line in (tmp_path / mode / "run" / row["trace"]).read_text().splitlines()]
    return row


@pytest.mark.docker
@pytest.mark.parametrize("mode", ["right", "wrong_recipient", "late"])
def test_a_scripted_agent_passes_by_the_right_actions_and_fails_by_a_wrong_recipient_or_acting_late(tmp_path, mode):
    row = _forward(tmp_path, mode)
    verdict = row["verdicts"]["gaia2"]
    results = [str(e.get("result")) for e in row["trace_events"] if e.get("type") == "env"]
    # Greg's email arrived while the agent worked: a notification in a tool's result, as ARE delivers it
    assert any("[notification]" in r and "gregb@example.com" in r for r in results), results
    forward = next(a for a in verdict["oracle_actions"] if a["tool"].endswith("__forward_email"))
    if mode == "right":
        assert row["correct"] is True and verdict["verdict"] == "pass", verdict
        assert forward["matched"] is True
        return
    assert row["status"] == "ok" and row["correct"] is False and verdict["verdict"] == "fail", verdict
    assert forward["matched"] is False and verdict["rationale"], verdict  # ARE's reason, kept in the row
    assert row["scores"]["gaia2"]["explanation"] == verdict["rationale"]


@pytest.mark.docker
def test_an_are_that_dies_mid_run_is_an_infra_error_never_a_wrong_answer(tmp_path):
    row = _forward(tmp_path, "kill_are")
    assert row["status"] == "error" and row["error_kind"] == "infra" and row["correct"] is not True, row
    assert "McpServerGone" in row["error"] and "'gaia2'" in row["error"], row["error"]  # the server that died, named
    assert row["duration_s"] < 60  # at once, not after the call's 180 s timeout
    assert row["returncode"] != 0


@pytest.mark.docker
def test_the_oracle_needs_no_model_and_any_other_agent_does(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "proto_find_image_file.json").write_text((SMOKE / "proto_find_image_file.json").read_text())
    oracle = harness("run", "--dataset", data, "--agent", "oracle", "--scorer", "gaia2", "--epochs", "1",
                     "--output-dir", tmp_path / "oracle")  # no --model, no replay.jsonl: it calls no model
    assert oracle.returncode == 0, explain(oracle)
    assert [r["correct"] for r in rows(tmp_path / "oracle")] == [True]
    other = harness("run", "--dataset", data, "--agent", "plain", "--scorer", "gaia2", "--output-dir", tmp_path / "p")
    assert other.returncode == 2 and "--model is required" in other.stderr, explain(other)
    assert not (tmp_path / "p").exists()


@pytest.mark.docker
def test_a_scenario_ares_judge_cannot_initialise_is_an_input_error_naming_it_and_ares_reason_before_the_agent(
        tmp_path):
    # A scenario whose Contacts has no user (`is_user`): ARE's judge cannot set up its state (before: the driver
    # died at start-up, an infra error retried three times).
    scenario = json.loads((SMOKE / "proto_forward_email.json").read_text())
    contacts = next(app for app in scenario["apps"] if app["name"] == "Contacts")["app_state"]["contacts"]
    del contacts["user_alex"]
    data = tmp_path / "data"
    data.mkdir()
    (data / "no_user.json").write_text(json.dumps(scenario))
    (data / "proto_find_image_file.json").write_text((SMOKE / "proto_find_image_file.json").read_text())
    proc = harness("run", "--dataset", data, "--agent", "oracle", "--scorer", "gaia2", "--epochs", "1",
                   "--max-retries", "2", "--output-dir", tmp_path / "run")
    got = {r["instance_id"]: r for r in rows(tmp_path / "run")}
    assert got["proto_find_image_file"]["correct"] is True, explain(proc)  # the other scenario ran and passed
    row = got["proto_forward_email"]
    assert row["status"] == "error" and row["error_kind"] == "input", explain(proc)
    assert row["attempt"] == 1 and row["correct"] is not True, row
    assert proc.returncode == 3, explain(proc)  # that scenario's input alone: the run went on (an instance errored)
    error = row["error"]
    assert "no_user.json" in error and "proto_forward_email" in error, error  # the scenario, by file and id
    assert "IndexError" in error and "extract_user_details" in error, error  # ARE's reason, where ARE gave it
    events = [json.loads(line) for line in (tmp_path / "run" / row["trace"]).read_text().splitlines()]
    assert not any(e.get("type") in ("env", "tool_call", "model_call") for e in events), events  # no agent ran
