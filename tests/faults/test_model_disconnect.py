"""The model connection closes the moment an instance's agent ends (issue 29 item 13: a killed
instance's request kept a one-slot local model server busy for 158 s more; a server that cancels a
request on disconnect, as llama.cpp's does, frees its slot only when the client closes its end).

The model is the scripted server (tests/fakes/openai_server.py) with a `hold` item: a request it never
answers, noting when the client closes the connection. Runs are the real CLI:

- the built-in runners (plain, AutoGen), killed at a short --instance-timeout while a call is held
  (the call starts after a 7 s tool run of a 10 s instance, so its own deadline, half the instance's
  limit, falls ~2 s past the kill, and the kill ~2.5 s after the call went out: margins a loaded
  machine keeps; after a 4 s tool run of an 8 s instance the call's deadline was 0.3 s past the kill
  and once came first, a model error): the connection closes with the kill;
- an in-sandbox agent program that gives up on its request after 3 s (its own client timeout) and
  exits: the proxy's call on its behalf must end with the program, not run on, holding the server,
  until the call's deadline (30 s of a 60 s instance) with nobody to read its answer.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, hold, text, tool_calls
from tests.helpers.e2e import containers_of, explain, fake_config, harness, out_dir, remove_leftovers, rows

GRACE_S = 3.0  # the most the connection may outlive the agent

GIVES_UP = r'''
import json, os, urllib.request
body = json.dumps({"model": os.environ["HARNESS_MODEL"], "messages": [{"role": "user", "content": "hi"}]})
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
try:
    urllib.request.urlopen(request, timeout=3).read()
    print("<solution>answered</solution>")
except OSError as exc:
    print("<solution>gave up: %s</solution>" % type(exc).__name__)
'''


def _run(tmp_path: Path, agent: str, script: list, timeout: float) -> tuple[dict, dict, float]:
    """One instance against a server holding its call: the row, the hold's record, when the row's instance
    ended (wall clock: its start plus its duration)."""
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": f"held-{out_dir(tmp_path).name}", "question": "What is 6*7?",
                                "answer": "42"}) + "\n")
    out = out_dir(tmp_path)
    try:
        with FakeOpenAI(script) as server:
            config = fake_config(tmp_path / "models.toml", server.base_url, timeout=120)
            proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                           "--agent", agent, "--instance-timeout", timeout, timeout=300)
            holds = list(server.holds)
        assert len(holds) == 1, (holds, explain(proc))
        (row,) = rows(out)
        ended = datetime.fromisoformat(row["started_at"]).timestamp() + row["duration_s"]
        assert containers_of(out) == []
        return row, holds[0], ended
    finally:
        remove_leftovers(out)


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["plain", "assistant"])
def test_a_killed_instances_model_connection_closes_with_it(tmp_path, image, reliability, agent):
    t0 = time.monotonic()
    script = [tool_calls(("run_shell", {"command": "sleep 7"})), hold(120)]
    row, held, ended = _run(tmp_path, agent, script, 10)
    gone = None if held["gone"] is None else held["gone"] - held["at"]
    reliability.record(f"a model call held open when its instance is killed at --instance-timeout 10 ({agent})",
                       f"the connection closed {gone:.1f} s after the call went out, the instance's row "
                       f"{row['status']} ({row['limit'] or row['error_kind']})" if gone is not None
                       else "the connection was never closed", started=t0)
    assert row["status"] == "limit" and row["limit"] == "wall_time", row
    assert held["gone"] is not None and held["gone"] <= ended + GRACE_S, (held, ended)


@pytest.mark.docker
def test_a_request_the_in_sandbox_agent_gave_up_on_is_not_kept_open(tmp_path, image, reliability):
    t0 = time.monotonic()
    program = tmp_path / "gives_up.py"
    program.write_text(GIVES_UP)
    row, held, ended = _run(tmp_path, f"sandbox:python3 @{program}", [hold(120)], 60)
    gone = None if held["gone"] is None else held["gone"] - held["at"]
    reliability.record("an in-sandbox agent that gives up on its model call after 3 s and exits (60 s instance)",
                       f"the call's connection closed {gone:.1f} s after it went out; the row {row['status']}, "
                       f"{row['duration_s']:.0f} s" if gone is not None else "the connection was never closed",
                       started=t0)
    assert row["status"] == "ok" and row["answer"] == "gave up: TimeoutError", row
    assert gone is not None and gone < 3 + 2 * GRACE_S, held  # was 30 s: the call's deadline
    assert held["gone"] <= ended + GRACE_S, (held, ended)


RETRIES = r'''
import json, os, urllib.request
def ask(timeout):
    body = json.dumps({"model": os.environ["HARNESS_MODEL"], "messages": [{"role": "user", "content": "hi"}]})
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    return json.load(urllib.request.urlopen(request, timeout=timeout))["choices"][0]["message"]["content"]
try:
    ask(3)
except OSError:
    print(ask(120))
'''


@pytest.mark.docker
def test_a_request_the_in_sandbox_agent_hung_up_on_is_cancelled_and_its_retry_served(tmp_path, image, reliability):
    """The program times out its first request and, still running, sends it again: the first call's
    connection must close, and the retry be served (it queued behind the abandoned call before)."""
    t0 = time.monotonic()
    program = tmp_path / "retries.py"
    program.write_text(RETRIES)
    row, held, ended = _run(tmp_path, f"sandbox:python3 @{program}", [hold(120), text("<solution>42</solution>")], 60)
    gone = None if held["gone"] is None else held["gone"] - held["at"]
    reliability.record("an in-sandbox agent that times out its model call after 3 s and sends it again",
                       f"the first call's connection closed {gone:.1f} s after it went out; the row {row['status']}, "
                       f"{row['duration_s']:.0f} s" if gone is not None else "the connection was never closed",
                       started=t0)
    assert row["status"] == "ok" and row["correct"] is True, row
    assert gone is not None and gone < 3 + 5 + 2 * GRACE_S, held  # watched every 5 s once a call is slow
