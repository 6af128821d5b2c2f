"""Gaia2's agent2agent phase: a scenario marked so runs with ARE's own `_apply_a2a_config` (every app but the
user's interface, SystemApp and InternalContacts made an app agent of ARE's default JSON ReAct agent), and each of
an app agent's model calls is asked of the harness on the host (MCP sampling, {"harness": "a2a"}), answered with
the agent's own model through the agent's meter. Here the agent is scripted (tests/helpers/gaia2_agents.py
AppAgentForwarder) and its model is the fake OpenAI server below, which drives ARE's app agent in ARE's own
"Thought / Action / <end_action>" form: list the inbox, forward Greg's email, final_answer. ARE judges the run as
any other: the app agent's forward is the oracle's action."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers.e2e import FAKE_KEY_ENV, explain, fake_config, harness, rows, trace

SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"
NAME = "proto_forward_email"
USAGE = (200, 30)
PRICES = (0.01, 0.02)  # per 1k tokens, in and out
SOFT_PASS = "Reasoning: the same.\nEvaluation: [[Success]] [[True]]\n<subtask>Tell the user it is done</subtask>"


def action(thought: str, name: str, arguments: dict) -> str:
    """One step of ARE's JSON ReAct agent, as its parser reads it."""
    return f"Thought: {thought}\nAction:\n{json.dumps({'action': name, 'action_input': arguments})}<end_action>"


class EmailAgentModel(FakeOpenAI):
    """The app agent's model: each reply follows from what ARE's app agent sent (its steps so far)."""

    def __init__(self, **kwargs: Any):
        super().__init__([], default=text("unused"), **kwargs)

    def respond_chat(self, body: Any, item: Any = None) -> tuple[int, Any, dict]:
        if item is not None or not isinstance(body, dict):  # the preflight's probe
            return super().respond_chat(body, item)
        messages = body.get("messages", [])
        steps = sum(1 for m in messages if m.get("role") == "assistant")
        if steps == 0:
            reply = action("I list the inbox.", "Emails__list_emails", {"folder_name": "INBOX"})
        elif steps == 1:
            found = re.findall(r"\b[0-9a-f]{32}\b", str(messages[-1].get("content")))  # Greg's email: a uuid hex
            reply = action("I forward Greg's email.", "Emails__forward_email",
                           {"email_id": found[0] if found else "none", "recipients": ["johndoe@example.com"],
                            "folder_name": "INBOX"})
        else:
            reply = action("Done.", "final_answer", {"answer": "task completed"})
        self._take()  # counted as served
        return super().respond_chat(body, text(reply, usage=USAGE))


def _dataset(tmp_path: Path) -> Path:
    """The smoke scenario marked as ARE marks an agent2agent one (its definition's has_a2a_augmentation)."""
    data = tmp_path / "data"
    data.mkdir(parents=True)
    scenario = json.loads((SMOKE / f"{NAME}.json").read_text())
    scenario["metadata"]["definition"]["has_a2a_augmentation"] = True
    (data / f"{NAME}.json").write_text(json.dumps(scenario))
    return data


def _run(tmp_path: Path, *flags: str, judge: FakeOpenAI | None = None) -> tuple[dict, list[dict], Path]:
    """The scenario in the agent2agent phase, the scripted agent handing the forward to the Emails app agent."""
    data, out = _dataset(tmp_path), tmp_path / "run"
    with EmailAgentModel() as model:
        config = fake_config(tmp_path / "models.toml", model.base_url, prices=PRICES)
        if judge is not None:
            config.write_text(config.read_text() + f'[llm.judge]\nmodel = "judge-model"\nbase_url = "{judge.base_url}"'
                              f'\napi_key_env = "{FAKE_KEY_ENV}"\nmax_retries = 0\n')
        proc = harness("run", "--dataset", data, "--agent", "tests.helpers.gaia2_agents:AppAgentForwarder",
                       "--model", "fake", "--config", config, "--scorer", "gaia2", "--epochs", "1",
                       "--max-retries", "0", "--output-dir", out, *flags)
        asked = [r["json"] for r in model.chat_requests]
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    return row, asked, out


@pytest.mark.docker
def test_the_app_agents_run_on_the_agents_model_through_the_host_and_ares_judges_their_actions(tmp_path):
    row, asked, out = _run(tmp_path)
    verdict = row["verdicts"]["gaia2"]
    assert row["correct"] is True and verdict["verdict"] == "pass", (verdict, asked)
    assert [a["matched"] for a in verdict["oracle_actions"]] == [True, True], verdict

    assert len(asked) == 3, asked  # list, forward, final_answer: ARE's app agent, step by step
    assert all(request["model"] == "fake-model-1" for request in asked)
    first = asked[0]["messages"]
    assert first[0]["role"] == "system" and "final_answer" in first[0]["content"]  # ARE's app agent's prompt
    assert "johndoe@example.com" in first[-1]["content"]  # the agent's task, handed over by expert_agent
    assert "gregb@example.com" in asked[1]["messages"][-1]["content"]  # the inbox it listed: an observation

    usage = row["usage"]  # the app agent's calls are the agent's own
    assert usage["llm_calls"] == 3 and usage["prompt_tokens"] == 3 * USAGE[0], usage
    assert usage["cost"] == pytest.approx(3 * (USAGE[0] * PRICES[0] + USAGE[1] * PRICES[1]) / 1000)
    events = trace(out, row)
    assert sum(1 for e in events if e.get("type") == "model_call") == 3
    handed = [e for e in events if e.get("type") == "env" and e.get("action") == "Emails__expert_agent"]
    assert [e["result"] for e in handed] == ['"task completed"'], events  # the app agent's final answer


def test_a_replay_model_cannot_be_an_app_agents_model(tmp_path):
    """A replay model answers its recorded turns in order; the app agents' calls cannot share them: exit 2 before
    any container, naming the scenario."""
    data = _dataset(tmp_path)
    shutil.copy(SMOKE / "replay.jsonl", data)
    proc = harness("run", "--dataset", data, "--agent", "plain", "--model", "replay", "--scorer", "gaia2",
                   "--epochs", "1", "--output-dir", tmp_path / "run")
    assert proc.returncode == 2, explain(proc)
    assert f"{NAME}: Gaia2's agent2agent phase runs ARE's app agents" in proc.stderr, explain(proc)
    assert not (tmp_path / "run" / "output.jsonl").exists()


@pytest.mark.docker
def test_the_llm_judge_and_the_app_agents_each_ask_their_own_model(tmp_path):
    """Both ask through the host in one run: the judge's calls reach the judge model and count as the judge's,
    the app agent's reach the agent's model and count as the agent's."""
    with FakeOpenAI([], default=text(SOFT_PASS, usage=(120, 8))) as judge:
        row, asked, _ = _run(tmp_path, "--judge-model", "judge", judge=judge)
        judged = [r["json"] for r in judge.chat_requests]
    verdict = row["verdicts"]["gaia2"]
    assert row["correct"] is True and verdict["judge"] == "llm", verdict
    assert len(asked) == 3 and row["usage"]["llm_calls"] == 3, row["usage"]
    assert judged and all(request["model"] == "judge-model" for request in judged)  # the user's message compared
    assert row["judge_usage"]["llm_calls"] == len(judged) and row["judge_usage"]["prompt_tokens"] == 120 * len(judged)
