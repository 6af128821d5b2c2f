"""Both runners complete an instance with a tool call in a real sandbox for `provider = "anthropic"`:
the real CLI, the real anthropic SDK (and AutoGen's Anthropic client) against a server speaking the
Messages API (tests/fakes/providers.py), preflight probe included; then the run's recording replays
offline (the replay model needs nothing of the provider)."""

from __future__ import annotations

import json
import os

import pytest

from tests.fakes.openai_server import text, tool_calls
from tests.fakes.providers import FakeAnthropic, anthropic_error
from tests.helpers.e2e import explain, harness, out_dir, rows, trace

pytestmark = pytest.mark.docker

KEY = "sk-ant-fake-e2e"
CODE = "print(sum(int(line.split(',')[1]) for line in open('/workspace/n.csv').read().split()[1:]))"


@pytest.mark.slow  # two runs of the CLI each (~35 s)
@pytest.mark.parametrize("agent", ["plain", "autogen"])
def test_an_anthropic_model_solves_an_instance_with_a_tool_call(tmp_path, image, agent):
    (tmp_path / "n.csv").write_text("k,v\na,2\nb,3\nc,37\n")
    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text(json.dumps({"instance_id": "anth-sum", "question": "Sum column v of n.csv.", "answer": "42",
                                   "files": ["n.csv"]}) + "\n")
    script = [anthropic_error(529, "overloaded_error", headers={"retry-after": "0"}),
              tool_calls(("run_python", {"code": CODE}), usage=(300, 40)),
              text("The sum is 42.\n<solution>42</solution>", usage=(400, 12))]
    out, recording = out_dir(tmp_path), tmp_path / "rec.jsonl"
    with FakeAnthropic(script, key=KEY) as server:
        (tmp_path / "models.toml").write_text(f"""
[llm.claude]
provider = "anthropic"
model = "{server.model}"
base_url = "{server.base_url}"
max_retries = 2
timeout = 30
""")
        args = ["--dataset", dataset, "--model", "claude", "--config", tmp_path / "models.toml", "--workers", 1,
                "--instance-timeout", 120] + (["--agent", "plain"] if agent == "plain" else [])
        proc = harness("run", *args, "--output-dir", out, "--record", recording, env={"ANTHROPIC_API_KEY": KEY})
    assert proc.returncode == 0, explain(proc)
    assert len(server.probes) == 1 and server.exhausted == 0
    assert [status for status, _ in server.responses] == [529, 200, 200]
    [row] = rows(out)
    assert row["status"] == "ok" and row["correct"] is True and row["answer"] == "42", row
    assert row["tool_calls"] == ["run_python"]
    assert row["usage"]["prompt_tokens"] == 700 and row["usage"]["completion_tokens"] == 52
    followup = server.chat_requests[-1]["json"]
    assert followup["messages"][-1]["content"][0]["type"] == "tool_result"
    assert "42" in json.dumps(followup["messages"][-1]["content"])  # the sandbox's real output
    results = [e for e in trace(out, row) if e.get("type") == "tool_result"]
    assert results and "42" in results[0]["content"]

    (tmp_path / "replay.toml").write_text(f'[llm.rec]\nkind = "replay"\npath = "{recording}"\n')
    again = out_dir(tmp_path, "p")
    replay_args = [a if a != "claude" else "rec" for a in args]
    replay_args[replay_args.index(tmp_path / "models.toml")] = tmp_path / "replay.toml"
    proc = harness("run", *replay_args, "--output-dir", again, "--fail-on-divergence")
    assert proc.returncode == 0, explain(proc)
    [replayed] = rows(again)
    assert replayed["correct"] is True and replayed["tool_calls"] == ["run_python"], replayed


def test_an_anthropic_key_never_visible_in_the_sandbox(tmp_path, image):
    """Secret canary for provider = "anthropic": ANTHROPIC_API_KEY reaches the Messages API server only,
    never the sandbox (its environment, /workspace, /tmp, any process's environ), the trace or run.json."""
    canary = "sk-ant-canary-" + os.urandom(8).hex()
    look = "grep -rsl " + canary[:18] + " /workspace /tmp /proc/*/environ 2>/dev/null; env; echo done"
    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text(json.dumps({"instance_id": "anth-canary", "question": "Look around.", "answer": "0"}) + "\n")
    out = out_dir(tmp_path)
    with FakeAnthropic([tool_calls(("run_shell", {"command": look})), text("<solution>0</solution>")],
                       key=canary) as server:
        (tmp_path / "models.toml").write_text(f'[llm.claude]\nprovider = "anthropic"\nmodel = "{server.model}"\n'
                                              f'base_url = "{server.base_url}"\ntimeout = 30\n')
        proc = harness("run", "--dataset", dataset, "--model", "claude", "--config", tmp_path / "models.toml",
                       "--output-dir", out, "--agent", "plain", env={"ANTHROPIC_API_KEY": canary})
        served = server.served
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    shown = "\n".join(e["content"] for e in trace(out, row) if e["type"] == "tool_result")
    assert "done" in shown  # the probe really ran in the sandbox
    assert canary not in shown and canary not in (out / row["trace"]).read_text()
    assert canary not in (out / "run.json").read_text()
    assert served >= 2  # the key was accepted: the fake refuses a call without it
