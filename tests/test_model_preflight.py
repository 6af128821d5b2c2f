"""Model sections and agents checked before any container (issue 17, item 2; the quick-try flags of item 7).

Real CLI, real AutoGen agents and real Docker sandboxes; the model is the scripted
OpenAI-compatible server (tests/fakes/openai_server.py), in its vLLM-like modes where it refuses
tools or an unknown model id. "Before any container" is asserted on the engine's own event log:
no container of the test's (unique) instance id was ever created.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness import exit_codes
from harness.agents.contract import AgentRunner
from tests.fakes.openai_server import REFUSE_TOOLS, FakeOpenAI, text, tool_calls
from tests.helpers.e2e import (
    FAKE_KEY,
    FAKE_KEY_ENV,
    containers_created_between,
    containers_of,
    explain,
    harness,
    out_dir,
    remove_leftovers,
    rows,
)

CODE = "print(6 * 7)"


def _task(tmp_path: Path, label: str) -> tuple[Path, str]:
    """A one-instance dataset (6*7 = 42) with an instance id unique to this test."""
    iid = f"{label}-{out_dir(tmp_path).name}"
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": iid, "question": "What is 6*7? Compute it.", "answer": "42"}) + "\n")
    return data, iid


def _three_lines(tmp_path: Path, base_url: str, model: str = "fake-model-1") -> Path:
    """The section a newcomer writes for a local or vLLM server: no model_info."""
    path = tmp_path / "models.toml"
    path.write_text(f'[llm.fake]\nmodel = "{model}"\nbase_url = "{base_url}"\napi_key_env = "{FAKE_KEY_ENV}"\n')
    return path


def _solves() -> list:
    return [tool_calls(("run_python", {"code": CODE})), text("It is 42.\n<solution>42</solution>")]


def _refused_before_any_container(proc, out: Path, iid: str, since: float) -> str:
    """The run's error line (exit 2, one line), once it is sure no sandbox was ever made."""
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    assert containers_created_between(iid, since, time.time()) == []
    assert not (out / "output.jsonl").exists() or rows(out) == []
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, explain(proc)
    return errors[0]


def _solved(proc, out: Path, server: FakeOpenAI, iid: str) -> dict:
    assert proc.returncode == 0, explain(proc)
    assert remove_leftovers(out) == []
    (row,) = rows(out)
    assert row["instance_id"] == iid and row["status"] == "ok" and row["error_kind"] is None, row
    assert row["correct"] is True and row["answer"] == "42" and row["tool_calls"] == ["run_python"], row
    # The tool ran in the sandbox: the model's second request carries its real output.
    followup = server.chat_requests[-1]["json"]["messages"]
    assert any(m["role"] == "tool" and "42" in m["content"] for m in followup), followup
    return row


@pytest.mark.docker
def test_a_three_line_section_runs_a_real_autogen_agent(tmp_path, image):
    data, iid = _task(tmp_path, "three")
    out = out_dir(tmp_path)
    with FakeOpenAI(_solves()) as server:
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", _three_lines(tmp_path, server.base_url),
                       "--output-dir", out, "--workers", 1, "--instance-timeout", 120)
        _solved(proc, out, server, iid)
        (probe,) = server.probes  # one preflight request, made as the AutoGen agent makes its calls
        sent = probe["json"]
        assert {t["function"]["name"] for t in sent["tools"]} >= {"run_python", "read_file"}
        assert sent["tool_choice"] == "auto" and sent["messages"][0]["role"] == "system", sent
        assert server.chat_requests[0]["json"]["tools"] == sent["tools"]  # the agent's own first call alike


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["assistant", "plain"])
def test_a_server_that_refuses_tools_exits_2_before_any_container(tmp_path, image, agent):
    data, iid = _task(tmp_path, f"notools-{agent}")
    out = out_dir(tmp_path)
    with FakeOpenAI(_solves(), refuse_tools=True) as server:
        since = time.time()
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", _three_lines(tmp_path, server.base_url),
                       "--output-dir", out, "--agent", agent, timeout=120)
        line = _refused_before_any_container(proc, out, iid, since)
        assert server.chat_requests == [] and len(server.probes) == 1 and server.probes[0]["json"]["tools"]
    assert "--model fake [llm.fake]" in line and f"400 {REFUSE_TOOLS}" in line, line
    assert containers_of(out) == []


@pytest.mark.docker
def test_a_wrong_model_id_exits_2_naming_the_section(tmp_path, image):
    data, iid = _task(tmp_path, "wrongid")
    out = out_dir(tmp_path)
    with FakeOpenAI(_solves(), model="qwen2.5-7b-instruct", strict_model=True) as server:
        since = time.time()
        proc = harness("run", "--dataset", data, "--model", "fake", "--config",
                       _three_lines(tmp_path, server.base_url, model="qwen2.5-7b"), "--output-dir", out, timeout=120)
        line = _refused_before_any_container(proc, out, iid, since)
        assert server.chat_requests == []
    assert "[llm.fake]" in line and "404 The model `qwen2.5-7b` does not exist." in line, line


@pytest.mark.docker
def test_the_quick_try_flags_run_end_to_end_without_a_config(tmp_path, image):
    data, iid = _task(tmp_path, "quick")
    out = out_dir(tmp_path)
    with FakeOpenAI(_solves(), model="qwen2.5-7b", strict_model=True) as server:  # any other model id: 404
        proc = harness("run", "--dataset", data, "--model", "openai-compatible/qwen2.5-7b", "--model-base-url",
                       server.base_url, "--model-key-env", FAKE_KEY_ENV, "--output-dir", out, "--workers", 1,
                       "--instance-timeout", 120)
        _solved(proc, out, server, iid)
        assert len(server.probes) == 1
        assert {r["headers"].get("authorization") for r in server.requests} == {f"Bearer {FAKE_KEY}"}
    run = json.loads((out / "run.json").read_text())
    assert run["model"] == "openai-compatible/qwen2.5-7b" and run["model_settings"]["base_url"] == server.base_url


@pytest.mark.docker
def test_the_quick_try_flags_are_checked_the_same_way(tmp_path, image):
    data, iid = _task(tmp_path, "quickbad")
    out = out_dir(tmp_path)
    with FakeOpenAI(_solves(), refuse_tools=True) as server:
        since = time.time()
        proc = harness("run", "--dataset", data, "--model", "openai-compatible/fake-model-1", "--model-base-url",
                       server.base_url, "--output-dir", out, timeout=120)
        line = _refused_before_any_container(proc, out, iid, since)
    assert f"--model openai-compatible/fake-model-1 --model-base-url {server.base_url}" in line, line
    assert REFUSE_TOOLS in line, line


@pytest.mark.parametrize("flags, expect", [
    (["--model", "openai-compatible/m"], "--model openai-compatible/m needs --model-base-url URL"),
    (["--model", "openai-compatible/", "--model-base-url", "http://127.0.0.1:9/v1"], "name the model after"),
    (["--model", "openai-compatible/m", "--model-base-url", "localhost:8000"], "--model-base-url 'localhost:8000'"),
    (["--model", "openai-compatible/m", "--model-base-url", "http://127.0.0.1:9/v1",
      "--model-key-env", "NO_SUCH_KEY_17"],
     "--model-key-env NO_SUCH_KEY_17: that environment variable is not set"),
    (["--model", "replay", "--model-base-url", "http://127.0.0.1:9/v1"], "go with --model openai-compatible/NAME"),
])
def test_bad_quick_try_flags_exit_2(tmp_path, flags, expect):
    data, _ = _task(tmp_path, "flags")
    proc = harness("run", "--dataset", data, *flags, "--output-dir", out_dir(tmp_path), timeout=120)
    assert proc.returncode == exit_codes.INPUT and expect in proc.stderr, explain(proc)
    assert len(proc.stderr.strip().splitlines()) == 1, explain(proc)


def test_the_quick_try_key_comes_from_openai_api_key(monkeypatch):
    from harness.models.config import flag_section

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert flag_section("openai-compatible/m", "http://h/v1", None).api_key() == "sk-from-env"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert flag_section("openai-compatible/m", "http://h/v1", None).api_key() == "not-needed"
    assert flag_section("fake", None, None) is None  # a config section: not made from flags


def test_model_info_without_function_calling_exits_2_before_any_request(tmp_path):
    data, _ = _task(tmp_path, "nofc")
    with FakeOpenAI(_solves()) as server:
        config = _three_lines(tmp_path, server.base_url)
        config.write_text(config.read_text() + "[llm.fake.model_info]\nfunction_calling = false\n")
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir",
                       out_dir(tmp_path), timeout=120)
        assert server.requests == []
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    assert "--agent assistant with --model fake [llm.fake]" in proc.stderr, proc.stderr
    assert "The model does not support function calling." in proc.stderr, proc.stderr


def test_a_misspelt_model_info_field_exits_2_in_one_line(tmp_path):
    data, _ = _task(tmp_path, "typo")
    config = _three_lines(tmp_path, "http://127.0.0.1:9/v1")
    config.write_text(config.read_text() + "[llm.fake.model_info]\nfunction_call = true\nvision = 'no'\n")
    proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir",
                   out_dir(tmp_path), timeout=120)
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    assert len(proc.stderr.strip().splitlines()) == 1, explain(proc)
    assert "[llm.fake]" in proc.stderr and "unknown field 'function_call'" in proc.stderr, proc.stderr


# -- agents checked at load ---------------------------------------------------------------------

def old_signature(answer, target):
    """Not an agent factory: two arguments."""


def returns_nothing(model_client, envs, instance, limits):
    """Forgets to return its agent."""


def breaks_while_building(model_client, envs, instance, limits):
    raise KeyError("no_such_setting\nin the factory's own config")


class NoTurn(AgentRunner):
    async def setup(self, ctx):
        pass


class SyncTurn(AgentRunner):
    async def setup(self, ctx):
        pass

    def turn(self, message):
        return ""


HERE = "tests.test_model_preflight"


@pytest.mark.docker
@pytest.mark.parametrize("attr, expect", [
    ("old_signature", "an AutoGen agent factory is called as factory(model_client, envs, instance, limits); "
                      "this one takes (answer, target)"),
    ("returns_nothing", "the factory returned NoneType, not an AutoGen agent or team"),
    ("breaks_while_building", "building the agent (before any sandbox) failed: KeyError"),
    ("NoTurn", "the AgentRunner subclass does not define turn"),
    ("SyncTurn", "SyncTurn.turn must be a coroutine"),
])
def test_a_broken_agent_exits_2_before_any_container(tmp_path, image, attr, expect):
    data, iid = _task(tmp_path, f"agent-{attr.lower()}")
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps({"instance_id": iid, "turns": [{"content": "<solution>42</solution>"}]}) + "\n")
    config = tmp_path / "replay.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{turns}"\n')
    out = out_dir(tmp_path)
    since = time.time()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--agent", f"{HERE}:{attr}", timeout=120)
    line = _refused_before_any_container(proc, out, iid, since)
    assert line.startswith(f"error (input): --agent {HERE}:{attr}") and expect in line, line


def test_the_servers_words_are_one_bounded_line():
    from harness.errors import InputError
    from harness.models.config import ModelSection
    from harness.models.probe import WORDS, ModelCheck, probe
    from tests.fakes.openai_server import error

    words = "bad \x1b[31mparameter\x1b[0m 'top_k'\r\nsecond line\x00 " + "x" * 5000
    refusal = error(400, {"error": {"message": words, "type": "invalid_request_error", "param": None, "code": None}})
    with FakeOpenAI([], probe=refusal) as server:
        with pytest.raises(InputError) as caught:
            probe(ModelCheck("--model", ModelSection(name="fake", model="fake-model-1", base_url=server.base_url)))
    message = str(caught.value)
    assert message.startswith("--model fake [llm.fake] (fake-model-1 at ")
    assert "400 bad parameter 'top_k' second line" in message
    assert message.isprintable(), message
    assert len(message) < WORDS + 200 and message.endswith("…"), len(message)
