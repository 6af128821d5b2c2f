"""Gaia2's soft checks: with `--judge-model`, ARE's LLM judge runs in the sandbox and asks each of its calls of
the harness on the host (MCP sampling), which answers with the run's judge model: the fake OpenAI server below
records ARE's own prompts, the row counts the calls' tokens and cost as the judge's, and the judge's words decide
the verdict. Without a judge model, ARE's scripted checks alone judge, which never compare a message's text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, error, text
from tests.helpers.e2e import FAKE_KEY_ENV, explain, harness, rows, trace

pytestmark = pytest.mark.docker
SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"
NAME = "proto_find_image_file"  # the oracle tells the user "The image file is `llama.jpg`"
SAYS = "It is llama.jpg, in your Downloads folder."  # the same fact in other words: only an LLM can compare them


def _dataset(tmp_path: Path) -> Path:
    """The one scenario, with a replayed agent that answers the user in its own words."""
    data = tmp_path / "data"
    data.mkdir(parents=True)
    shutil.copy(SMOKE / f"{NAME}.json", data)
    turns = [{"tool_calls": [{"name": "AgentUserInterface__send_message_to_user", "arguments": {"content": SAYS}}]},
             {"content": "Told the user. <solution>done</solution>"}]
    (data / "replay.jsonl").write_text(json.dumps({"instance_id": NAME, "turns": turns}) + "\n")
    return data


def _config(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "models.toml"
    config.write_text(f"""
[llm.judge]
model = "judge-model"
base_url = "{url}"
api_key_env = "{FAKE_KEY_ENV}"
max_retries = 0
price_input_per_1k = 0.01
price_output_per_1k = 0.02
""")
    return config


def _run(tmp_path: Path, label: str, reply: str | None) -> tuple[dict, list[dict]]:
    data, out = _dataset(tmp_path / label), tmp_path / label / "run"
    args = ["run", "--dataset", data, "--agent", "plain", "--model", "replay", "--scorer", "gaia2", "--output-dir", out,
            "--epochs", "1"]
    if reply is None:
        proc, asked = harness(*args), []
    else:
        with FakeOpenAI([], default=text(reply, usage=(120, 8))) as judge:
            proc = harness(*args, "--config", _config(tmp_path / label, judge.base_url), "--judge-model", "judge")
            asked = [r["json"] for r in judge.chat_requests]
    assert proc.returncode == 0, explain(proc)
    warned = json.loads((out / "report.json").read_text())["figures"]["gaia2"]["judge"]["warning"]
    assert (warned is not None) is (reply is None), warned  # the scripted checks alone: said, at the run's end too
    assert ("not comparable to ARE's leaderboard" in proc.stdout) is (reply is None), explain(proc)
    (row,) = rows(out)
    return row, asked


def test_soft_checks_ask_the_runs_judge_model_through_the_host_and_count_its_cost(tmp_path):
    passed, asked = _run(tmp_path, "success", "Reasoning: the same file.\nEvaluation: [[Success]] [[True]]\n"
                                              "<subtask>Tell the user the image file's name</subtask>")
    verdict = passed["verdicts"]["gaia2"]
    assert passed["correct"] is True and verdict["judge"] == "llm", verdict
    assert asked, "ARE's judge made no call through the host"
    prompts = ["\n".join(str(m["content"]) for m in request["messages"]) for request in asked]
    assert all(request["model"] == "judge-model" for request in asked)
    assert any(SAYS in prompt and "llama.jpg" in prompt.replace(SAYS, "") for prompt in prompts)  # agent vs oracle
    assert any(request["messages"][0]["role"] == "system" for request in asked)  # ARE's judge prompts, whole
    judged = passed["judge_usage"]
    assert judged["llm_calls"] == len(asked) and judged["prompt_tokens"] == 120 * len(asked)
    assert judged["cost"] == pytest.approx(len(asked) * (120 * 0.01 + 8 * 0.02) / 1000)
    assert passed["usage"]["cost"] == 0  # the replayed agent's own calls cost nothing: the judge's are apart

    failed, asked = _run(tmp_path, "failure", "Reasoning: another file.\nEvaluation: [[Failure]] [[False]]\n"
                                              "<subtask>Tell the user the image file's name</subtask>")
    assert asked and failed["correct"] is False, failed
    assert failed["verdicts"]["gaia2"]["verdict"] == "fail" and failed["scores"]["gaia2"]["explanation"]

    hard, _ = _run(tmp_path, "hard", None)  # no judge model: the message's text is never compared
    assert hard["correct"] is True and hard["verdicts"]["gaia2"]["judge"] == "hard"
    assert hard["judge_usage"]["llm_calls"] == 0


def test_a_judge_call_that_fails_is_an_unjudged_scenario_never_a_wrong_one(tmp_path):
    data, out = _dataset(tmp_path), tmp_path / "run"
    with FakeOpenAI([], default=error(500, {"error": {"message": "judge down"}})) as judge:
        proc = harness("run", "--dataset", data, "--agent", "plain", "--model", "replay", "--scorer", "gaia2",
                       "--epochs", "1", "--output-dir", out, "--config", _config(tmp_path, judge.base_url),
                       "--judge-model", "judge")
    assert proc.returncode == 3, explain(proc)  # a scorer that could not judge: counted, said, exit 3
    (row,) = rows(out)
    assert row["correct"] is None or row["correct"] is False and row["scores"] == {}, row
    verdict = row["verdicts"]["gaia2"]
    assert verdict["verdict"] == "error" and "judge down" in verdict["error"], verdict


def test_what_ares_judge_was_sent_and_said_is_in_the_trace(tmp_path):
    """Issue 41 item 4: ARE's judge rejected a right paraphrase and its prompts and words were nowhere."""
    reply = "Reasoning: another file.\nEvaluation: [[Failure]] [[False]]\n<subtask>Tell the user</subtask>"
    row, asked = _run(tmp_path, "reject", reply)
    judged = [e for e in trace(tmp_path / "reject" / "run", row) if e["type"] == "judge_call"]
    assert asked and len(judged) == len(asked), (len(judged), len(asked))  # before: none
    assert all(e["judge"] == "gaia2" and e["model"] == "judge" and e["reply"] == reply for e in judged), judged
    assert any(SAYS in "\n".join(str(m["content"]) for m in e["messages"]) for e in judged)
