"""The framework-free `plain` runner end to end: the real `harness run` CLI, real sandboxes, a real agent
process; the model is the fake OpenAI-compatible server (tests/fakes/openai_server.py) or a replay.

Also: no module under harness/ outside harness/agents/autogen/ imports AutoGen.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import DATA, FAKE_KEY, REPO, containers_of, explain, fake_config, harness, rows, trace

SANDBOX_TOOLS = {"run_python", "run_shell", "list_files", "read_file", "find_in_file"}
# Names of AutoGen's own message/event types: none may leak into the harness's traces.
FRAMEWORK_DUMPS = ("ToolCallRequestEvent", "ToolCallExecutionEvent", "ToolCallSummaryMessage", "TextMessage",
                   "FunctionExecutionResult", "FunctionCall", "models_usage", "autogen")


@pytest.mark.docker
def test_plain_runner_with_openai_compatible_server(tmp_path, image, out):
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": "plain-oai-six-sevens", "question": "What is 6 times 7?",
                                "answer": "42"}) + "\n")
    script = [tool_calls(("run_python", {"code": "print(6*7)"}), usage=(120, 15)),
              text("The sandbox says 6*7 is <solution>42</solution>", usage=(200, 8))]
    with FakeOpenAI(script) as server:
        proc = harness("run", "--dataset", data, "--model", "fake", "--config",
                       fake_config(tmp_path / "m.toml", server.base_url), "--output-dir", out,
                       "--agent", "plain", "--workers", 1, "--instance-timeout", 120)
    assert proc.returncode == 0, explain(proc)
    assert server.exhausted == 0, "the runner asked for more completions than scripted"

    (row,) = rows(out)
    assert row["status"] == "ok" and row["error_kind"] is None, row
    assert row["correct"] is True and row["answer"] == "42" and row["answer_source"] == "solution_tag"
    assert row["tool_calls"] == ["run_python"]
    assert row["usage"]["prompt_tokens"] == 320 and row["usage"]["completion_tokens"] == 23
    assert row["usage"]["llm_calls"] == 2 and row["steps"] == 2

    first, second = (r["json"] for r in server.chat_requests)
    assert len(server.chat_requests) == 2
    assert all(r["headers"].get("authorization") == f"Bearer {FAKE_KEY}" for r in server.chat_requests)
    assert first["model"] == "fake-model-1"
    # The tool schemas went to the model, built from the tool functions' signatures.
    names = {t["function"]["name"] for t in first["tools"]}
    assert names >= SANDBOX_TOOLS, names
    run_python = next(t for t in first["tools"] if t["function"]["name"] == "run_python")
    assert run_python["type"] == "function"
    assert run_python["function"]["parameters"] == {"type": "object", "properties": {"code": {"type": "string"}},
                                                    "additionalProperties": False,
                                                    "required": ["code"]}
    assert "Python" in run_python["function"]["description"]
    read_file = next(t for t in first["tools"] if t["function"]["name"] == "read_file")
    assert read_file["function"]["parameters"]["required"] == ["path"]
    assert read_file["function"]["parameters"]["properties"]["page"] == {"type": "integer", "default": 1}
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "What is 6 times 7?" in first["messages"][1]["content"]
    assert second["tools"] == first["tools"]

    # The follow-up carries the assistant's tool call and the real sandbox output for it.
    call = server.responses[0][1]["choices"][0]["message"]["tool_calls"][0]
    messages = second["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"], messages
    assert messages[:2] == first["messages"]
    sent_call = messages[2]["tool_calls"][0]
    assert sent_call["id"] == call["id"] and sent_call["function"]["name"] == "run_python"
    assert json.loads(sent_call["function"]["arguments"]) == {"code": "print(6*7)"}
    tool_message = messages[3]
    assert tool_message["tool_call_id"] == call["id"]
    assert "42" in tool_message["content"] and "exit code: 0" in tool_message["content"], tool_message

    events = trace(out, row)
    (env,) = [e for e in events if e["type"] == "env"]
    assert env["action"] == "run_python" and env["stdout"].strip() == "42" and env["exit_code"] == 0
    assert [e["usage"] for e in events if e["type"] == "model_call"] == [
        {"prompt_tokens": 120, "completion_tokens": 15}, {"prompt_tokens": 200, "completion_tokens": 8}]
    assert containers_of(out) == []


@pytest.mark.docker
def test_plain_runner_with_replay_writes_harness_trace_events(image, out):
    dataset = DATA / "plain-replay" / "tasks.jsonl"
    proc = harness("run", "--dataset", dataset, "--model", "replay", "--agent", "plain", "--output-dir", out,
                   "--workers", 1, "--instance-timeout", 120)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is True, row
    assert row["answer"] == "B9E1D5-YRANAC" and row["tool_calls"] == ["run_python"]
    assert row["usage"] == {"prompt_tokens": 720, "completion_tokens": 52, "llm_calls": 2, "cost": 0.0,
                            "cached_prompt_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0,
                            "cache_hits": 0}  # the token classes a replay's recording does not report

    raw = (out / row["trace"]).read_text()
    events = trace(out, row)
    kinds = [e["type"] for e in events if e["type"] in
             ("system_prompt", "tools", "model_call", "tool_call", "tool_result", "message")]
    assert kinds == ["system_prompt", "tools", "model_call", "tool_call", "tool_result", "model_call", "message"], kinds
    (offered,) = [e for e in events if e["type"] == "tools"]  # the schemas the model is sent, once
    assert "run_python" in [d["function"]["name"] for d in offered["tools"]] and offered["agents"] is None
    assert events[0]["type"] == "task" and "canary.txt" in events[0]["task"]
    system = next(e for e in events if e["type"] == "system_prompt")
    assert system["source"] == "plain" and "<solution>" in system["content"]
    (call,) = [e for e in events if e["type"] == "tool_call"]
    (result,) = [e for e in events if e["type"] == "tool_result"]
    assert call["name"] == result["name"] == "run_python" and call["call_id"] == result["call_id"] != ""
    assert call["arguments"] == {"code": "print(open('canary.txt').read().strip()[::-1].upper())"}
    # Computed in the sandbox from the copied file: the recording holds only the code.
    assert "B9E1D5-YRANAC" in result["content"] and result["is_error"] is False
    assert "exit code: 0" in result["content"]
    (env,) = [e for e in events if e["type"] == "env"]
    assert env["stdout"].strip() == "B9E1D5-YRANAC"
    assert events.index(call) < events.index(env) < events.index(result)
    message = [e for e in events if e["type"] == "message"][-1]
    assert message["source"] == "plain" and message["content"].endswith("<solution>B9E1D5-YRANAC</solution>")

    # Only the harness's own event types, no framework dumps.
    harness_types = {"task", "system_prompt", "tools", "message", "tool_call", "tool_result", "model_call_started",
                     "model_call", "env", "user_reply", "limit", "error", "verdict"}
    assert {e["type"] for e in events} <= harness_types
    for needle in FRAMEWORK_DUMPS:
        assert needle not in raw, needle
    assert containers_of(out) == []


@pytest.mark.docker
def test_sloppy_tool_calls_are_told_to_the_model_not_fatal(tmp_path, image, out):
    """Invalid JSON, a non-object, an unknown tool, a missing and a mistyped argument: each is one error
    result the model reads (as with AutoGen's FunctionTool), and a lax "1" for an int is coerced."""
    (tmp_path / "notes.txt").write_text("the magic word is xylophone\n")
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": "plain-sloppy", "question": "What is the magic word in notes.txt?",
                                "answer": "xylophone", "files": ["notes.txt"]}) + "\n")
    script = [tool_calls(("run_python", "{not json"), ("run_python", "[1, 2]"), ("no_such_tool", {}),
                         ("run_shell", {"command": 12345}), ("run_python", {}),
                         ("read_file", {"path": "notes.txt", "page": "1"})),
              text("<solution>xylophone</solution>")]
    with FakeOpenAI(script) as server:
        proc = harness("run", "--dataset", data, "--model", "fake", "--config",
                       fake_config(tmp_path / "m.toml", server.base_url), "--output-dir", out,
                       "--agent", "plain", "--workers", 1, "--instance-timeout", 120)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["error_kind"] is None and row["correct"] is True, row
    assert row["tool_calls"] == ["run_python", "run_python", "no_such_tool", "run_shell", "run_python", "read_file"]

    tool_messages = [m for m in server.chat_requests[1]["json"]["messages"] if m["role"] == "tool"]
    contents = [m["content"] for m in tool_messages]
    assert len(contents) == 6
    assert all(c.startswith("Error: bad arguments for run_python") for c in (contents[0], contents[1], contents[4]))
    assert "_raw" in contents[0] and "_value" in contents[1] and "code" in contents[4]
    assert contents[2].startswith("Error: no tool named 'no_such_tool'") and "run_python" in contents[2]
    assert contents[3].startswith("Error: bad arguments for run_shell") and "string" in contents[3]
    assert contents[5].startswith("[notes.txt: page 1 of 1]") and "xylophone" in contents[5]

    events = trace(out, row)
    assert [e["is_error"] for e in events if e["type"] == "tool_result"] == [True] * 5 + [False]
    calls = [e for e in events if e["type"] == "tool_call"]
    assert calls[0]["arguments"] == {"_raw": "{not json"} and calls[1]["arguments"] == {"_value": [1, 2]}
    # Nothing ran in the sandbox for the refused calls; the file was read once.
    assert [(e["env"], e["action"]) for e in events if e["type"] == "env"] == [("file", "read")]


def _imports(tree: ast.AST, package: str) -> list[str]:
    """Absolute names this module imports (relative imports resolved against `package`)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.append(module)
            names += [f"{module}.{alias.name}" for alias in node.names]
    return names


def test_no_autogen_import_outside_the_autogen_runner():
    root = REPO / "harness"
    framework = root / "agents" / "autogen"
    checked, offenders = 0, []
    for path in sorted(root.rglob("*.py")):
        if framework in path.parents:
            continue
        package = ".".join(path.relative_to(REPO).parts[:-1])  # what relative imports resolve against
        for name in _imports(ast.parse(path.read_text(), str(path)), package):
            top = name.split(".")[0]
            if top.startswith("autogen") or name.startswith("harness.agents.autogen"):
                offenders.append(f"{path.relative_to(REPO)}: {name}")
        checked += 1
    assert checked > 30  # the walk really saw the package
    assert offenders == []


def test_the_plain_path_loads_no_autogen_module():
    """Importing the CLI, the runner and the agent process and making a plain runner pulls in no AutoGen."""
    code = ("import sys\n"
            "import harness.cli, harness.runner.run, harness.runner.agent_process.child, harness.runner.rescore\n"
            "from harness.agents.registry import resolve\n"
            "runner = resolve('plain')()\n"
            "import harness.models.chat, harness.environments.tools, harness.agents.user\n"
            "print(type(runner).__module__)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('autogen')"
            " or m.startswith('harness.agents.autogen')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["harness.agents.plain.runner", "[]"]


def test_the_ast_check_catches_autogen_imports():
    """The checker itself: plain, from- and relative imports of AutoGen are all seen."""
    tree = ast.parse("import autogen_core\nfrom autogen_agentchat.agents import AssistantAgent\n"
                     "from .autogen import runner\nimport os\n")
    names = _imports(tree, "harness.agents")
    assert "autogen_core" in names and "autogen_agentchat.agents" in names
    assert "harness.agents.autogen" in names and "os" in names


def test_a_reply_with_a_custom_tool_call_is_a_model_error(monkeypatch):
    """The plain runner offers function tools only: a reply with a custom (free-form) tool call is the
    model's error that says so (it was "could not be read as a chat completion (AttributeError: ...)")."""
    import asyncio

    from harness.errors import ModelError
    from harness.models.chat import OpenAIChat
    from harness.models.config import ModelSection
    from harness.models.meter import Meter
    from tests.fakes.openai_server import raw

    reply = {"id": "c1", "object": "chat.completion", "created": 0, "model": "fake-model-1",
             "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                 "role": "assistant", "content": None,
                 "tool_calls": [{"id": "call_1", "type": "custom", "custom": {"name": "grep", "input": "x"}}]}}],
             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    monkeypatch.setenv("FAKE_OPENAI_KEY_CUSTOM", "sk-test")

    async def main(base_url: str):
        section = ModelSection(name="fake", model="fake-model-1", base_url=base_url,
                               api_key_env="FAKE_OPENAI_KEY_CUSTOM", max_retries=0, timeout=30)
        chat = OpenAIChat(section, Meter(max_tokens=None, max_steps=None))
        try:
            return await chat.complete([{"role": "user", "content": "hi"}], [])
        finally:
            await chat.close()

    with FakeOpenAI([raw(json.dumps(reply))]) as server:
        with pytest.raises(ModelError, match=r"^model fake: the reply has a 'custom' tool call"):
            asyncio.run(main(server.base_url))
