"""A Gaia2 run that ends at a limit is judged by ARE on what it did, as ARE's runner validates every run once its
agent stops (its iteration cap included): stopped at --max-steps, each scenario gets ARE's verdict and counts in the
figures (never "left out"); killed at --instance-timeout, the parent asks the verdict of ARE's driver, which still
runs in the sandbox, before the sandbox goes (its judge's calls answered on the host: tests/test_gaia2_sandbox.py).
The agent is the plain runner over a fake OpenAI-compatible server (tests/fakes/openai_server.py)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from harness.benchmarks.gaia2.environment import AFTER_KILL_S
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import FAKE_KEY_ENV, explain, harness, out_dir, rows

pytestmark = pytest.mark.docker
SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"
IDS = ["proto_find_image_file", "proto_forward_email", "proto_multi_turn"]
CLOCK = ("SystemApp__get_current_time", {})  # a read: no action ARE matches


def _model(server: FakeOpenAI) -> list[str]:
    return ["--agent", "plain", "--scorer", "gaia2", "--model", "openai-compatible/fake-model-1",
            "--model-base-url", server.base_url, "--model-key-env", FAKE_KEY_ENV, "--epochs", "1"]


def test_runs_stopped_at_max_steps_are_judged_by_are_and_counted(tmp_path):
    out = out_dir(tmp_path, "steps")
    with FakeOpenAI([], default=tool_calls(CLOCK)) as server:  # an agent that only ever reads the clock
        proc = harness("run", "--dataset", SMOKE, *_model(server), "--max-steps", "3", "--workers", "3",
                       "--output-dir", out)
    assert proc.returncode == 0, explain(proc)  # each run judged: none left out, nothing to exit 3 for
    got = {r["instance_id"]: r for r in rows(out)}
    assert sorted(got) == IDS
    for row in got.values():
        assert (row["status"], row["limit"], row["correct"]) == ("limit", "max_steps", False), row
        assert row["verdicts"]["gaia2"]["verdict"] == "fail" and row["scores"]["gaia2"]["explanation"], row
    figures = json.loads((out / "report.json").read_text())["figures"]["gaia2"]
    assert figures["headline"]["accuracy"] == 0.0 and figures["headline"]["not_judged"] == [], figures
    assert sum(c["judged_runs"] for c in figures["capabilities"].values()) == 3
    assert all(c["not_judged_runs"] == 0 for c in figures["capabilities"].values())


def test_a_run_killed_at_its_wall_clock_limit_is_judged_before_its_sandbox_goes(tmp_path):
    """An agent that reads the clock on a slow model until it is killed: the parent asks ARE's driver, still running
    in the sandbox, for its verdict before the sandbox goes, within its bound (the judge's calls answered on the
    host: tests/test_gaia2_sandbox.py)."""
    data, out, timeout = tmp_path / "data", out_dir(tmp_path, "killed"), 30
    data.mkdir()
    shutil.copy(SMOKE / "proto_forward_email.json", data)
    with FakeOpenAI([], default=tool_calls(CLOCK), delay=1.0) as agent:
        proc = harness("run", "--dataset", data, *_model(agent), "--instance-timeout", timeout, "--max-steps", 1000,
                       "--output-dir", out)
    assert proc.returncode == 0, explain(proc)  # judged: nothing left out
    (row,) = rows(out)
    assert (row["status"], row["limit"], row["correct"]) == ("limit", "wall_time", False), row
    assert row["verdicts"]["gaia2"]["verdict"] == "fail" and row["scores"]["gaia2"]["explanation"], row
    assert row["duration_s"] < timeout + AFTER_KILL_S + 30, row["duration_s"]  # asked within its bound (ARE may
    # still be starting at the kill on a loaded machine: the verdict waits for it)
    # ARE's trace of the run, exported when the driver judged it, kept beside the trace before the sandbox went
    kept = out / (row["trace"].removesuffix(".jsonl") + ".are.json.gz")
    trace = json.loads(gzip.decompress(kept.read_bytes()))
    assert trace["metadata"]["annotation"]["validation_decision"] == "Invalid" and trace["completed_events"], trace
    assert row["verdicts"]["gaia2"]["are_trace"]["gzip_bytes"] == kept.stat().st_size


def test_no_simulated_user_nudges_once_are_says_the_scenario_is_over(tmp_path):
    """The agent tells the user, ARE says that was the last turn, the agent's turn ends in words without
    <solution>: GAIA's simulated user says nothing (Gaia2's policy: no "answer inside <solution>" nudges, no more
    model calls)."""
    data, out = tmp_path / "data", out_dir(tmp_path, "told")
    data.mkdir()
    shutil.copy(SMOKE / "proto_find_image_file.json", data)
    tell = tool_calls(("AgentUserInterface__send_message_to_user", {"content": "The image file is `llama.jpg`"}))
    with FakeOpenAI([tell], default=text("I told the user.")) as agent:
        proc = harness("run", "--dataset", data, *_model(agent), "--output-dir", out)
        calls = len(agent.chat_requests)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["user_replies"] == 0 and calls == 2, (row["user_replies"], calls)
    events = [json.loads(line) for line in (out / row["trace"]).read_text().splitlines()]
    assert not [e for e in events if e.get("type") == "user_reply"]
    assert any("the task is over" in str(e.get("result")) for e in events if e.get("type") == "env")
    assert row["correct"] is True and row["verdicts"]["gaia2"]["verdict"] == "pass", row
