"""A Gaia2 run that ends at a limit is judged by ARE on what it did, as ARE's runner validates every run once its
agent stops (its iteration cap included): stopped at --max-steps, each scenario gets ARE's verdict and counts in the
figures (never "left out"); killed at --instance-timeout, the parent asks the verdict of ARE's driver, which still
runs in the sandbox, before the sandbox goes: its judge's calls answered on the host by the run's judge model.
The agent is the plain runner over a fake OpenAI-compatible server (tests/fakes/openai_server.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import FAKE_KEY_ENV, explain, harness, rows

pytestmark = pytest.mark.docker
SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"
IDS = ["proto_find_image_file", "proto_forward_email", "proto_multi_turn"]
CLOCK = ("SystemApp__get_current_time", {})  # a read: no action ARE matches


def _model(server: FakeOpenAI) -> list[str]:
    return ["--agent", "plain", "--scorer", "gaia2", "--model", "openai-compatible/fake-model-1",
            "--model-base-url", server.base_url, "--model-key-env", FAKE_KEY_ENV, "--epochs", "1"]


def test_runs_stopped_at_max_steps_are_judged_by_are_and_counted(tmp_path):
    out = tmp_path / "run"
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


def _judge_config(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "models.toml"
    config.write_text(f'[llm.judge]\nmodel = "judge-model"\nbase_url = "{url}"\napi_key_env = "{FAKE_KEY_ENV}"\n'
                      "max_retries = 0\n")
    return config


def test_a_run_killed_at_its_wall_clock_limit_is_judged_before_its_sandbox_goes(tmp_path):
    """The agent tells the user the answer in its own words (only an LLM can compare them), then reads the clock
    until it is killed: the parent asks ARE's driver for the verdict, and answers its judge's calls itself."""
    data, out, timeout = tmp_path / "data", tmp_path / "run", 40
    data.mkdir()
    shutil.copy(SMOKE / "proto_find_image_file.json", data)
    says = "It is llama.jpg, in your Downloads folder."
    tell = tool_calls(("AgentUserInterface__send_message_to_user", {"content": says}))
    with FakeOpenAI([tell], default=tool_calls(CLOCK), delay=1.0) as agent, \
            FakeOpenAI([], default=text("Evaluation: [[Success]] [[True]]", usage=(50, 5))) as judge:
        proc = harness("run", "--dataset", data, *_model(agent), "--instance-timeout", timeout, "--max-steps", 1000,
                       "--config", _judge_config(tmp_path, judge.base_url), "--judge-model", "judge",
                       "--output-dir", out)
        asked = judge.chat_requests
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert (row["status"], row["limit"]) == ("limit", "wall_time"), row
    verdict = row["verdicts"]["gaia2"]
    assert verdict["verdict"] == "pass" and verdict["judge"] == "llm" and row["correct"] is True, verdict
    assert asked and any(says in json.dumps(r["json"]) for r in asked)  # ARE's soft check, answered by the host
    assert row["judge_usage"]["llm_calls"] == len(asked)
    assert row["duration_s"] < timeout + 60, row["duration_s"]  # the verdict asked within its bound


def test_no_simulated_user_nudges_once_are_says_the_scenario_is_over(tmp_path):
    """The agent tells the user, ARE says that was the last turn, the agent's turn ends in words without
    <solution>: GAIA's simulated user says nothing (Gaia2's policy: no "answer inside <solution>" nudges, no more
    model calls)."""
    data, out = tmp_path / "data", tmp_path / "run"
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
