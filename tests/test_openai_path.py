"""`harness run` through the real OpenAI client path, against a scripted OpenAI-compatible server.

Real sandboxes (Docker), the real autogen_ext `OpenAIChatCompletionClient` (with the
openai SDK's own retries), the real agent process; only the model is a fake HTTP server
(tests/fakes/openai_server.py).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, error, text, tool_calls
from tests.helpers.e2e import containers_created_between, fake_config

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[1]
KEY_ENV = "FAKE_OPENAI_KEY"
KEY = "sk-fake-test-0123456789"
PRICE_IN, PRICE_OUT = 1.0, 2.0  # per 1k tokens

AMOUNTS = {"north": 1234, "south": 987, "east": 2045, "west": 318}
TOTAL = sum(AMOUNTS.values())  # 4584: appears in neither the CSV, the question nor the code
CODE = (
    "import csv\n"
    "with open('/workspace/sales.csv', newline='') as fh:\n"
    "    total = sum(int(row['amount']) for row in csv.DictReader(fh))\n"
    "print(f'TOTAL={total}')\n"
)


# -- helpers --------------------------------------------------------------------------------------

def harness_containers(instance_id: str) -> set[str]:
    """Harness containers (any state) of this test's instance: its unique id keeps other runs' out."""
    out = subprocess.run(["docker", "ps", "-aq", "--no-trunc", "--filter", "label=harness.managed=1",
                          "--filter", f"label=harness.instance_id={instance_id}"],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    return set(out.split())


@pytest.fixture
def instance_id():
    """A unique instance id; at the end no container of it may exist, whatever happened.

    Containers are matched by this id, not by harness.managed=1 alone, so sandboxes of other
    harness runs on the same engine (running concurrently) neither fail nor get touched by the check.
    """
    iid = f"oai-csv-sum-{secrets.token_hex(4)}"
    assert not harness_containers(iid)
    yield iid
    leftover = harness_containers(iid)
    if leftover:
        subprocess.run(["docker", "rm", "-f", "-v", *leftover], capture_output=True, timeout=60)
    assert not leftover, f"containers left behind: {leftover}"


def make_dataset(tmp_path: Path, instance_id: str) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "sales.csv").write_text("region,amount\n" + "".join(f"{r},{a}\n" for r, a in AMOUNTS.items()))
    row = {"instance_id": instance_id, "question": "What is the total of the 'amount' column in sales.csv?",
           "answer": str(TOTAL), "files": ["sales.csv"]}
    (data / "tasks.jsonl").write_text(json.dumps(row) + "\n")
    return data / "tasks.jsonl"


def make_config(tmp_path: Path, base_url: str, *, max_retries: int = 3, timeout: float = 30) -> Path:
    return fake_config(tmp_path / "models.toml", base_url, max_retries=max_retries, timeout=timeout, key_env=KEY_ENV,
                       prices=(PRICE_IN, PRICE_OUT))


def harness_run(dataset: Path, config: Path, out: Path, *, key: str | None = KEY,
                timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    if key is not None:
        env[KEY_ENV] = key
    env["HARNESS_RETRY_BACKOFF"] = "0"
    cmd = [sys.executable, "-m", "harness", "run", "--dataset", str(dataset), "--model", "fake",
           "--config", str(config), "--output-dir", str(out), "--workers", "1", "--instance-timeout", "90"]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def rows_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "output.jsonl").read_text().splitlines() if line.strip()]


def explain(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-5000:]}"


# -- tests ----------------------------------------------------------------------------------------

def test_tool_call_runs_in_sandbox_after_client_retries(tmp_path, image, instance_id):
    tool_usage, final_usage = (321, 45), (654, 32)
    script = [
        error(500, {"error": {"message": "upstream exploded", "type": "server_error", "param": None,
                              "code": None}}, {"retry-after-ms": "10"}),
        error(429, {"error": {"message": "slow down", "type": "rate_limit_error", "param": None,
                              "code": "rate_limit_exceeded"}}, {"retry-after": "0", "retry-after-ms": "10"}),
        tool_calls(("run_python", {"code": CODE}), usage=tool_usage),
        text(f"The amounts add up to {TOTAL}.\n<solution>{TOTAL}</solution>", usage=final_usage),
    ]
    dataset, out = make_dataset(tmp_path, instance_id), tmp_path / "out"
    with FakeOpenAI(script) as server:
        proc = harness_run(dataset, make_config(tmp_path, server.base_url, max_retries=3), out)
    assert proc.returncode == 0, explain(proc)
    assert server.exhausted == 0, "the agent asked for more completions than scripted"

    rows = rows_of(out)
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["status"] == "ok", row
    assert row["error_kind"] is None and row["correct"] is True, row
    assert row["answer"] == str(TOTAL) and row["answer_source"] == "solution_tag"
    assert row["attempt"] == 1
    assert row["tool_calls"] == ["run_python"]

    # Tokens are counted from the two successful completions only (errors carry no usage).
    usage = row["usage"]
    prompt = tool_usage[0] + final_usage[0]
    completion = tool_usage[1] + final_usage[1]
    assert usage["prompt_tokens"] == prompt
    assert usage["completion_tokens"] == completion
    assert usage["llm_calls"] == 2 and row["steps"] == 2
    assert usage["cost"] == pytest.approx((prompt * PRICE_IN + completion * PRICE_OUT) / 1000)

    # The server saw the client's own retries: 500 -> retry, 429 -> retry, tool call, final answer.
    chats = server.chat_requests
    assert len(chats) >= 4, [r["path"] for r in server.requests]
    assert [status for status, _ in server.responses] == [500, 429, 200, 200]
    for request in server.requests:
        assert request["headers"].get("authorization") == f"Bearer {KEY}", request["headers"]
    first = chats[0]["json"]
    assert first["model"] == "fake-model-1"
    assert not first.get("stream")
    assert {t["function"]["name"] for t in first["tools"]} >= {"run_python", "run_shell", "list_files",
                                                                "read_file", "find_in_file"}
    assert chats[1]["json"]["messages"] == first["messages"] == chats[2]["json"]["messages"]  # retries

    # The request after the tool call carries the tool's real output from the sandbox.
    call_id = server.responses[2][1]["choices"][0]["message"]["tool_calls"][0]["id"]
    followup = chats[3]["json"]["messages"]
    assistant = [m for m in followup if m["role"] == "assistant" and m.get("tool_calls")]
    assert assistant and assistant[-1]["tool_calls"][0]["id"] == call_id
    assert json.loads(assistant[-1]["tool_calls"][0]["function"]["arguments"]) == {"code": CODE}
    tool_msgs = [m for m in followup if m["role"] == "tool"]
    assert len(tool_msgs) == 1, followup
    assert tool_msgs[0]["tool_call_id"] == call_id
    assert f"TOTAL={TOTAL}" in tool_msgs[0]["content"], tool_msgs[0]
    assert "exit code: 0" in tool_msgs[0]["content"]

    # The trace records the sandbox action and both model calls.
    events = [json.loads(line) for line in (out / row["trace"]).read_text().splitlines()]
    env_events = [e for e in events if e.get("type") == "env" and e.get("action") == "run_python"]
    assert len(env_events) == 1, events
    assert env_events[0]["args"]["code"] == CODE
    assert env_events[0]["exit_code"] == 0 and f"TOTAL={TOTAL}" in env_events[0]["stdout"]
    llm_events = [e for e in events if e.get("type") == "model_call"]
    assert len(llm_events) == 2
    assert [e["usage"] for e in llm_events] == [
        {"prompt_tokens": tool_usage[0], "completion_tokens": tool_usage[1]},
        {"prompt_tokens": final_usage[0], "completion_tokens": final_usage[1]}]

    report = json.loads((out / "report.json").read_text())
    assert report["n_selected"] == 1 and report["n_correct"] == 1 and report["n_errors"] == 0


def test_model_error_after_client_retries_is_recorded(tmp_path, image, instance_id):
    # Always 500, no retry-after header: the openai SDK backs off (~0.4-0.5 s) once, then gives up.
    always_500 = error(500, {"error": {"message": "model is down", "type": "server_error", "param": None,
                                       "code": None}})
    dataset, out = make_dataset(tmp_path, instance_id), tmp_path / "out"
    started = time.monotonic()
    with FakeOpenAI([], default=always_500) as server:
        proc = harness_run(dataset, make_config(tmp_path, server.base_url, max_retries=1), out, timeout=60)
    elapsed = time.monotonic() - started
    assert proc.returncode == 3, explain(proc)  # the instance errored (harness/exit_codes.py)
    assert elapsed < 60

    rows = rows_of(out)
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["status"] == "error", row
    assert row["error_kind"] == "model", row
    assert "500" in (row["error"] or "") or "InternalServerError" in (row["error"] or ""), row["error"]
    assert row["correct"] is False
    assert row["attempt"] == 1  # model errors are not retried on a fresh sandbox
    assert row["usage"]["llm_calls"] == 0 and row["usage"]["prompt_tokens"] == 0

    # One request and exactly max_retries (1) client retry, all with the key.
    assert len(server.chat_requests) == 2, len(server.chat_requests)
    assert all(r["headers"].get("authorization") == f"Bearer {KEY}" for r in server.requests)

    report = json.loads((out / "report.json").read_text())
    assert report["n_errors"] == 1
    assert report["errors_by_kind"] == {"model": 1}
    assert report["n_correct"] == 0


def test_missing_api_key_fails_before_any_container(tmp_path, instance_id):
    dataset, out = make_dataset(tmp_path, instance_id), tmp_path / "out"
    with FakeOpenAI([text("never asked")]) as server:
        since = time.time()
        proc = harness_run(dataset, make_config(tmp_path, server.base_url), out, key=None, timeout=60)
        until = time.time()
    assert proc.returncode == 2, explain(proc)
    assert KEY_ENV in proc.stderr, proc.stderr
    assert server.requests == []
    assert containers_created_between(instance_id, since, until) == []
    assert not harness_containers(instance_id)
    assert not (out / "output.jsonl").exists()


def test_record_a_real_run_then_replay_it_and_judge_with_its_own_model(tmp_path, image, instance_id):
    script = [tool_calls(("run_python", {"code": CODE}), usage=(300, 40)),
              text(f"<solution>{TOTAL}</solution>", usage=(500, 10))]
    judge_script = [text("The candidate equals the reference.\n**Verdict:** CORRECT", usage=(50, 5))]
    dataset, out, recording = make_dataset(tmp_path, instance_id), tmp_path / "rec-run", tmp_path / "rec.jsonl"
    with FakeOpenAI(script) as server, FakeOpenAI(judge_script) as judge:
        config = make_config(tmp_path, server.base_url)
        config.write_text(config.read_text() + f"""
[llm.judge]
model = "judge-model"
base_url = "{judge.base_url}"
api_key_env = "{KEY_ENV}"
""")
        env = {**os.environ, KEY_ENV: KEY}
        proc = subprocess.run([sys.executable, "-m", "harness", "run", "--dataset", str(dataset), "--model", "fake",
                               "--config", str(config), "--output-dir", str(out), "--record", str(recording),
                               "--scorer", "gaia", "--scorer", "llm_judge", "--judge-model", "judge"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows_of(out)
    assert row["correct"] is True and row["scores"]["llm_judge"]["correct"] is True
    (judged,) = judge.chat_requests
    prompt = judged["json"]["messages"][0]["content"]
    assert "total of the 'amount' column" in prompt and str(TOTAL) in prompt

    (recorded,) = [json.loads(line) for line in recording.read_text().splitlines()]
    assert recorded["instance_id"] == instance_id
    assert [list(t)[0] for t in recorded["turns"]] == ["tool_calls", "content"]
    assert recorded["turns"][0]["tool_calls"][0] == {"name": "run_python", "arguments": {"code": CODE}}

    replay_config = tmp_path / "replay.toml"
    replay_config.write_text(f'[llm.again]\nkind = "replay"\npath = "{recording}"\n')
    out2 = tmp_path / "replayed"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "--dataset", str(dataset), "--model", "again",
                           "--config", str(replay_config), "--output-dir", str(out2)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, explain(proc)
    (again,) = rows_of(out2)
    assert again["correct"] is True and again["usage"]["prompt_tokens"] == 800
    events = [json.loads(line) for line in (out2 / again["trace"]).read_text().splitlines()]
    assert any(e.get("action") == "run_python" and f"TOTAL={TOTAL}" in e.get("stdout", "") for e in events)
