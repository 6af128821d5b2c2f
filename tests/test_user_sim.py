"""The simulated user end to end: a turn that ends without <solution> gets a reply, and the agent goes on.

Real `harness run`, real sandboxes and agent processes, for both the AutoGen `assistant` agent
and the framework-free `plain` agent; models are recorded turns or the fake OpenAI server.
"""

from __future__ import annotations

import json
import secrets
import time

import pytest

from harness.agents.contract import DEFAULT_USER_REPLY
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import (
    containers_created_between,
    containers_of,
    explain,
    fake_config,
    harness,
    out_dir,
    replay_instance,
    rows,
    trace,
)

AGENTS = ["assistant", "plain"]
AMOUNTS = {"north": 1721, "south": 388, "east": 2093}
TOTAL = str(sum(AMOUNTS.values()))  # 4202: in neither the files' single values nor the question
QUESTION = "What is the total amount of all regions? The data is in sales.csv and sales.json."
FILES = {"sales.csv": "region,amount\n" + "".join(f"{r},{a}\n" for r, a in AMOUNTS.items()),
         "sales.json": json.dumps([{"region": r, "amount": a} for r, a in AMOUNTS.items()])}
CODE = "import csv\nprint(sum(int(r['amount']) for r in csv.DictReader(open('sales.csv'))))\n"
ASKED = "Should I use the CSV or the JSON file?"
ASK = {"content": ASKED, "usage": {"prompt_tokens": 200, "completion_tokens": 11}}
TOOL = {"tool_calls": [{"name": "run_python", "arguments": {"code": CODE}}],
        "usage": {"prompt_tokens": 260, "completion_tokens": 30}}
DONE = {"content": f"The CSV adds up to {TOTAL}.\n<solution>{TOTAL}</solution>",
        "usage": {"prompt_tokens": 330, "completion_tokens": 14}}


@pytest.fixture
def iid():
    return f"user-sim-{secrets.token_hex(4)}"


def run_recorded(tmp_path, out, iid, turns, *flags, agent="plain", script=False, code=0):
    """code: the expected exit code (3 when the instance errors: harness/exit_codes.py)."""
    data, config = replay_instance(tmp_path / "data", iid, QUESTION, TOTAL, turns, FILES)
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--agent", agent, "--workers", 1, "--instance-timeout", 120, *flags, script=script)
    assert proc.returncode == code, explain(proc)
    (row,) = rows(out)
    return row, trace(out, row)


def index_of(events, predicate) -> int:
    found = [i for i, e in enumerate(events) if predicate(e)]
    assert len(found) == 1, [e["type"] for e in events]
    return found[0]


def assert_replied_then_solved(row, events, reply: str):
    assert row["status"] == "ok" and row["error_kind"] is None, row
    assert row["correct"] is True and row["answer"] == TOTAL and row["answer_source"] == "solution_tag", row
    assert row["user_replies"] == 1
    assert row["tool_calls"] == ["run_python"] and row["usage"]["llm_calls"] == 3
    (user,) = [e for e in events if e["type"] == "user_reply"]
    assert user["number"] == 1 and user["content"] == reply
    asked = index_of(events, lambda e: e["type"] == "message" and e["content"] == ASKED)
    replied = events.index(user)
    called = index_of(events, lambda e: e["type"] == "tool_call")
    result = index_of(events, lambda e: e["type"] == "tool_result")
    solved = index_of(events, lambda e: e["type"] == "message" and "<solution>" in e["content"])
    # Turn 1 (the question), the user's reply, then turn 2 (tool call, real sandbox output, answer).
    assert asked < replied < called < result < solved
    assert replied == asked + 1  # the reply answers that very message
    assert TOTAL in events[result]["content"] and not events[result]["is_error"]


@pytest.mark.docker
@pytest.mark.parametrize("agent", AGENTS)
def test_default_reply_lets_the_agent_go_on(tmp_path, image, out, iid, agent):
    row, events = run_recorded(tmp_path, out, iid, [ASK, TOOL, DONE], agent=agent)
    assert_replied_then_solved(row, events, DEFAULT_USER_REPLY)
    assert containers_of(out) == []


@pytest.mark.docker
@pytest.mark.parametrize("agent", AGENTS)
def test_no_replies_leaves_the_question_as_the_answer(tmp_path, image, out, iid, agent):
    row, events = run_recorded(tmp_path, out, iid, [ASK, TOOL, DONE], "--max-user-replies", 0, agent=agent)
    assert row["status"] == "ok" and row["error_kind"] is None, row
    assert row["answer"] == ASKED and row["answer_source"] == "final_message"
    assert row["correct"] is False and row["user_replies"] == 0
    assert row["usage"]["llm_calls"] == 1 and row["tool_calls"] == []
    assert not [e for e in events if e["type"] in ("user_reply", "tool_call")]


@pytest.mark.docker
@pytest.mark.parametrize("agent", AGENTS)
def test_user_function_replies_in_its_own_words(tmp_path, image, out, iid, agent):
    row, events = run_recorded(tmp_path, out, iid, [ASK, TOOL, DONE],
                               "--user-function", "tests.helpers.users:prefer_csv", agent=agent)
    assert_replied_then_solved(row, events, f"Use the CSV file (reply 1 about {iid}, level 1).")


@pytest.mark.docker
def test_the_installed_script_imports_a_user_function_from_the_working_directory(tmp_path, image, out, iid):
    """`harness run` (the console script, not `python -m`) finds tests.helpers.users from the repository root,
    as the agent's process does."""
    row, events = run_recorded(tmp_path, out, iid, [ASK, TOOL, DONE],
                               "--user-function", "tests.helpers.users:prefer_csv", script=True)
    assert_replied_then_solved(row, events, f"Use the CSV file (reply 1 about {iid}, level 1).")


@pytest.mark.docker
@pytest.mark.parametrize("function, agent, message", [
    ("broken", "plain", "raised ZeroDivisionError: the user function divided by zero"),
    ("broken", "assistant", "raised ZeroDivisionError: the user function divided by zero"),
    ("not_text", "plain", "returned int, not a reply (str) or None"),
])
def test_a_failing_user_function_is_an_input_error_not_the_agents(tmp_path, image, out, iid, function, agent,
                                                                  message):
    row, events = run_recorded(tmp_path, out, iid, [ASK, TOOL, DONE],
                               "--user-function", f"tests.helpers.users:{function}", agent=agent, code=3)
    assert row["status"] == "error" and row["error_kind"] == "input", row
    assert f"--user-function tests.helpers.users:{function} {message}" in row["error"]
    assert row["attempt"] == 1 and row["user_replies"] == 0 and row["correct"] is False
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["kind"] == "input" and "Traceback" in error["traceback"]
    assert not [e for e in events if e["type"] == "user_reply"]


@pytest.mark.docker
def test_user_reply_flag_sets_the_text(tmp_path, image, out, iid):
    row, events = run_recorded(tmp_path, out, iid, [ASK, TOOL, DONE], "--user-reply", "The CSV one, thanks.")
    assert_replied_then_solved(row, events, "The CSV one, thanks.")


@pytest.mark.docker
def test_a_user_function_returning_none_does_not_reply(tmp_path, image, out, iid):
    row, events = run_recorded(tmp_path, out, iid, [ASK, TOOL, DONE],
                               "--user-function", "tests.helpers.users:silent")
    assert row["status"] == "ok" and row["user_replies"] == 0 and row["usage"]["llm_calls"] == 1
    assert row["answer_source"] == "final_message" and row["correct"] is False
    assert not [e for e in events if e["type"] == "user_reply"]


@pytest.mark.docker
def test_replies_stop_at_max_user_replies(tmp_path, image, out, iid):
    row, events = run_recorded(tmp_path, out, iid, [ASK] * 5 + [DONE], "--max-user-replies", 2)
    assert row["status"] == "ok" and row["user_replies"] == 2 and row["usage"]["llm_calls"] == 3
    assert row["answer"] == ASKED and row["correct"] is False
    assert [e["number"] for e in events if e["type"] == "user_reply"] == [1, 2]


@pytest.mark.docker
def test_no_reply_once_the_recording_is_used_up(tmp_path, image, out, iid):
    """A replayed agent whose last recorded turn asks a question ends there, not in a model error."""
    row, events = run_recorded(tmp_path, out, iid, [ASK])
    assert row["status"] == "ok" and row["error_kind"] is None, row
    assert row["user_replies"] == 0 and row["usage"]["llm_calls"] == 1 and row["answer"] == ASKED
    assert not [e for e in events if e["type"] in ("user_reply", "error")]


@pytest.mark.docker
@pytest.mark.parametrize("agent", AGENTS)
def test_the_reply_reaches_the_model_as_a_user_message(tmp_path, image, out, iid, agent):
    """Through the real OpenAI client: the second request continues the conversation with the reply."""
    data = tmp_path / "tasks.jsonl"
    for name, content in FILES.items():
        (tmp_path / name).write_text(content)
    data.write_text(json.dumps({"instance_id": iid, "question": QUESTION, "answer": TOTAL,
                                "files": sorted(FILES)}) + "\n")
    script = [text(ASKED), tool_calls(("run_python", {"code": CODE})), text(DONE["content"])]
    with FakeOpenAI(script) as server:
        proc = harness("run", "--dataset", data, "--model", "fake", "--config",
                       fake_config(tmp_path / "m.toml", server.base_url), "--output-dir", out, "--agent", agent,
                       "--workers", 1, "--instance-timeout", 120,
                       "--user-function", "tests.helpers.users:prefer_csv")
    assert proc.returncode == 0, explain(proc)
    assert server.exhausted == 0
    (row,) = rows(out)
    reply = f"Use the CSV file (reply 1 about {iid}, level None)."
    assert row["correct"] is True and row["user_replies"] == 1, row
    first, second, third = (r["json"]["messages"] for r in server.chat_requests)
    assert second[:len(first)] == first  # the same conversation, continued
    assert [(m["role"], m.get("content")) for m in second[len(first):]] == [("assistant", ASKED), ("user", reply)]
    tool_message = [m for m in third if m["role"] == "tool"]
    assert len(tool_message) == 1 and TOTAL in tool_message[0]["content"]


@pytest.mark.parametrize("value, message", [
    ("nosuch:fn", "--user-function nosuch:fn"),
    ("tests.helpers.users:nosuch", "--user-function tests.helpers.users:nosuch"),
    ("tests.helpers.users:NOT_CALLABLE", "not callable"),
    ("no_colon", "module:attribute"),
])
def test_a_bad_user_function_exits_2_before_any_container(tmp_path, iid, value, message):
    data, config = replay_instance(tmp_path / "data", iid, QUESTION, TOTAL, [ASK, TOOL, DONE], FILES)
    out = out_dir(tmp_path)
    since = time.time()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--agent", "plain", "--user-function", value)
    until = time.time()
    assert proc.returncode == 2, explain(proc)
    assert message in proc.stderr and "input" in proc.stderr, proc.stderr
    assert not out.exists()  # refused during validation: the output dir is made after preflight
    assert containers_created_between(iid, since, until) == [] and containers_of(out) == []


def test_negative_max_user_replies_exits_2(tmp_path, iid):
    data, config = replay_instance(tmp_path / "data", iid, QUESTION, TOTAL, [ASK], FILES)
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir",
                   out_dir(tmp_path), "--max-user-replies", -1)
    assert proc.returncode == 2 and "--max-user-replies" in proc.stderr, explain(proc)
