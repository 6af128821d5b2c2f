"""A budget against a server that omits `usage` (issue 29 item 7): `--max-cost` was silently useless,
every call billed at $0 (12 calls, no warning), since a reply's cost is its reported tokens at the
section's prices. Decided: refuse such a budget before any container (exit 2 naming the flag), as a
budget that cannot be kept; estimating tokens from characters could be off by several times for code
or non-English text, and a budget must hold.

The model is the scripted server (tests/fakes/openai_server.py) whose probe is a chat completion
without `usage`; the runs are the real CLI with the AutoGen and the plain runner.
"""

from __future__ import annotations

import json
import time

import pytest

from harness import exit_codes
from tests.fakes.openai_server import FakeOpenAI, raw, text
from tests.helpers.e2e import containers_created_between, explain, fake_config, harness, out_dir

NO_USAGE = raw(json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model-1",
                           "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                        "message": {"role": "assistant", "content": "OK"}}]}))


@pytest.mark.docker
@pytest.mark.parametrize("flag", ["--max-cost", "--max-instance-cost"])
@pytest.mark.parametrize("agent", ["assistant", "plain"])
def test_a_budget_against_a_server_without_usage_exits_2_before_any_container(tmp_path, reliability, agent, flag):
    iid = f"nousage-{out_dir(tmp_path).name}"
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": iid, "question": "What is 6*7?", "answer": "42"}) + "\n")
    out = out_dir(tmp_path)
    with FakeOpenAI([], default=text("<solution>42</solution>"), probe=NO_USAGE) as server:
        config = fake_config(tmp_path / "models.toml", server.base_url, prices=(0.01, 0.03))
        since, t0 = time.time(), time.monotonic()
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", agent, flag, "0.5", timeout=180)
        seconds = time.monotonic() - t0
        asked = len(server.chat_requests)
    created = containers_created_between(iid, since, time.time())
    reliability.record(f"{flag} against a server whose replies carry no usage ({agent} agent)",
                       f"exit {proc.returncode} before any container, naming {flag}", leaked=len(created),
                       seconds=seconds)
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, explain(proc)
    assert f": {flag}: --model fake [llm.fake]" in errors[0], errors
    assert "without token usage" in errors[0] and "budget cannot be kept" in errors[0], errors
    assert created == [] and asked == 0 and not (out / "output.jsonl").exists()


@pytest.mark.docker
def test_a_budget_against_a_server_with_usage_runs(tmp_path):
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": f"usage-{out_dir(tmp_path).name}", "question": "What is 6*7?",
                                "answer": "42"}) + "\n")
    out = out_dir(tmp_path)
    with FakeOpenAI([], default=text("<solution>42</solution>")) as server:
        config = fake_config(tmp_path / "models.toml", server.base_url, prices=(0.01, 0.03))
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", "plain", "--max-cost", "0.5", timeout=180)
    assert proc.returncode == exit_codes.OK, explain(proc)
