"""A retried model call leaves a trace event per attempt (issue 29 item 13): a call the client sent
again (its own `max_retries`: a 5xx, a timeout, a dropped connection) showed as one `model_call`,
nothing saying it was re-sent (one call of 126 s against a 120 s timeout).

The model is the scripted server (tests/fakes/openai_server.py): a 500, then the answer; the runs
are the real CLI with the AutoGen and the plain runner (the official OpenAI client's and AutoGen's
own retries, max_retries = 1).
"""

from __future__ import annotations

import json
import time

import pytest

from harness import exit_codes
from tests.fakes.openai_server import FakeOpenAI, error, text
from tests.helpers.e2e import containers_of, explain, fake_config, harness, out_dir, remove_leftovers, rows, trace


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["assistant", "plain"])
def test_each_attempt_of_a_retried_model_call_is_traced(tmp_path, image, reliability, agent):
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": f"retry-{out_dir(tmp_path).name}", "question": "What is 6*7?",
                                "answer": "42"}) + "\n")
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    try:
        with FakeOpenAI([error(500), text("<solution>42</solution>")]) as server:
            config = fake_config(tmp_path / "models.toml", server.base_url, max_retries=1)
            proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                           "--agent", agent, "--instance-timeout", 120, timeout=240)
            sent = len(server.chat_requests)
        (row,) = rows(out)
        events = trace(out, row)
        attempts = [e for e in events if e["type"] == "model_attempt"]
        calls = [e for e in events if e["type"] == "model_call"]
        reliability.record(f"a model call retried by the client after a 500 ({agent} agent)",
                           f"{sent} requests sent, {len(calls)} model_call and {len(attempts)} model_attempt "
                           "traced", lost=0, leaked=len(containers_of(out)), started=t0)
        assert proc.returncode == exit_codes.OK and row["correct"] is True, explain(proc)
        assert sent == 2 and len(calls) == 1, (sent, calls)
        assert [(e["model"], e["attempt"]) for e in attempts] == [("fake", 2)], attempts
        started = next(i for i, e in enumerate(events) if e["type"] == "model_call_started")
        assert started < events.index(attempts[0]) < events.index(calls[0])
    finally:
        assert remove_leftovers(out) == []
