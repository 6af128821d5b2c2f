"""MCP tool servers (--mcp, [mcp.NAME]): a real server written with the mcp SDK (tests/data/mcp/calc_server.py)
started inside a real sandbox through the bridge (harness/environments/mcp_bridge.py), or over streamable HTTP on
the host; its tools called by the plain runner and by AutoGen, driven by the scripted fake OpenAI server.
Also the configuration's checks and the schema-carrying tools (no Docker)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import socket
from pathlib import Path

import PIL.Image
import pytest

from harness import exit_codes
from harness.agents.contract import Limits
from harness.agents.dry import dry_environments
from harness.environments.images import png_size
from harness.environments.mcp_config import McpServer, combine, from_flag, from_toml
from harness.environments.tools import SchemaTool, arguments_model, schema
from harness.errors import InputError
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.calc_http import calc_over_http
from tests.helpers.e2e import DATA, containers_of, explain, fake_config, harness, rows, trace

SERVER = DATA / "mcp" / "calc_server.py"
ADD_SCHEMA = {"type": "object", "properties": {"a": {"title": "A", "type": "integer"},
                                               "b": {"title": "B", "type": "integer"}},
              "required": ["a", "b"], "title": "addArguments"}


def _dataset(tmp_path: Path) -> Path:
    """One task whose folder holds the server's script (copied to /workspace like any task file)."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "calc_server.py").write_text(SERVER.read_text())
    (folder / "tasks.jsonl").write_text(json.dumps({"instance_id": "mcp-add", "question": "What is 2 + 40?",
                                                    "answer": "42", "files": ["calc_server.py"]}) + "\n")
    return folder / "tasks.jsonl"


def _mcp_run(tmp_path, out, agent: str, script, *extra, env=None):
    with FakeOpenAI(script) as server:
        proc = harness("run", "--dataset", _dataset(tmp_path), "--model", "fake", "--config",
                       fake_config(tmp_path / "m.toml", server.base_url), "--output-dir", out, "--agent", agent,
                       "--workers", 1, "--instance-timeout", 300, *extra, env=env)
    return proc, server


def _tool_named(request: dict, name: str) -> dict:
    return next(t for t in request["json"]["tools"] if t["function"]["name"] == name)


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["plain", "assistant"])
def test_a_stdio_server_runs_in_the_sandbox_and_both_runners_call_its_tools(tmp_path, image, out, agent):
    script = [tool_calls(("calc__add", {"a": 2, "b": 40}), ("calc__where_am-i", {}), ("calc__fail", {})),
              text("<solution>42</solution>")]
    proc, server = _mcp_run(tmp_path, out, agent, script,
                            "--mcp", "calc=python3 /workspace/calc_server.py")
    assert proc.returncode == 0, explain(proc)
    # The preflight started it in a sandbox of its own and listed its tools, one line for the server.
    assert ("MCP server 'calc': 5 tool(s): calc__add, calc__where_am-i, calc__fail, calc__big, calc__picture"
            in proc.stderr)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is True, row
    first, second = server.chat_requests
    # The server's own schema and description reach the model, beside the built-in tools.
    add = _tool_named(first, "calc__add")["function"]
    assert add["parameters"] == ADD_SCHEMA and add["description"] == "Add two integers."
    assert {"run_python", "calc__where_am-i", "calc__fail", "calc__big"} <= {
        t["function"]["name"] for t in first["json"]["tools"]}
    results = [m["content"] for m in second["json"]["messages"] if m["role"] == "tool"]
    assert "the sum is 42" in results[0]
    # It ran inside the sandbox: the sandbox's hostname and working directory, not the host's.
    assert "cwd /workspace" in results[1] and socket.gethostname() not in results[1]
    assert "Error executing tool fail" in results[2]
    events = [e for e in trace(out, row) if e["type"] == "env" and e["env"] == "mcp"]
    # AutoGen runs one reply's calls at once: their events come in the order they end, not the reply's
    assert sorted((e["action"], e["outcome"]) for e in events) == [
        ("calc__add", "ok"), ("calc__fail", "error"), ("calc__where_am-i", "ok")]
    added = next(e for e in events if e["action"] == "calc__add")
    assert added["args"] == {"server": "calc", "tool": "add", "arguments": {"a": 2, "b": 40}}
    assert row["env_outcomes"]["mcp"] == {"ok": 2, "error": 1}
    assert containers_of(out) == []


@pytest.mark.docker
def test_a_server_that_exits_at_once_fails_the_preflight_naming_it(tmp_path, image, out):
    proc, server = _mcp_run(tmp_path, out, "plain", [text("<solution>42</solution>")],
                            "--mcp", "calc=python3 /workspace/calc_server.py",
                            "--mcp", 'broken=sh -c "echo cannot-serve-today >&2; exit 3"')
    assert proc.returncode == 2, explain(proc)
    said = proc.stderr + proc.stdout
    assert "MCP server 'broken' did not start" in said and "cannot-serve-today" in said, explain(proc)
    assert "before any instance" in said
    assert not (out / "output.jsonl").exists() and not (out / "run.json").exists()
    assert "MCP server 'calc': 5 tool(s)" in said  # checked before the broken one
    assert server.chat_requests == [] and len(server.probes) == 1  # no agent ran
    assert containers_of(out) == []


@pytest.mark.docker
def test_a_server_that_fails_in_a_later_instance_is_that_instances_infra_error(tmp_path, image, out):
    """The preflight starts the servers with the first instance's files; the second ships no server script."""
    data = _dataset(tmp_path)
    with data.open("a") as fh:
        fh.write(json.dumps({"instance_id": "mcp-bare", "question": "What is 2 + 40?", "answer": "42"}) + "\n")
    with FakeOpenAI([text("<solution>42</solution>")] * 2) as server:
        proc = harness("run", "--dataset", data, "--model", "fake", "--config",
                       fake_config(tmp_path / "m.toml", server.base_url), "--output-dir", out, "--agent", "plain",
                       "--workers", 1, "--max-retries", 0, "--mcp", "calc=python3 /workspace/calc_server.py")
    assert proc.returncode == exit_codes.INSTANCE_ERRORS, explain(proc)
    by_id = {r["instance_id"]: r for r in rows(out)}
    assert by_id["mcp-add"]["status"] == "ok", by_id["mcp-add"]
    bare = by_id["mcp-bare"]
    assert bare["status"] == "error" and bare["error_kind"] == "infra", bare
    assert "MCP server 'calc'" in bare["error"] and "calc_server.py" in bare["error"], bare["error"]
    assert containers_of(out) == []


@pytest.mark.docker
def test_a_limit_reached_while_servers_are_connected_stays_a_limit(tmp_path, image, out):
    """The transports' task groups wrap what the agent raises; it is unwrapped, so it keeps its kind."""
    script = [tool_calls(("calc__add", {"a": 2, "b": 40})), text("<solution>42</solution>")]
    proc, _ = _mcp_run(tmp_path, out, "plain", script, "--max-steps", 1,
                       "--mcp", "calc=python3 /workspace/calc_server.py")
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "limit" and row["limit"] == "max_steps", row


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["plain", "assistant"])
def test_an_mcp_tools_image_is_shown_to_a_vision_model(tmp_path, image, out, agent):
    """calc__picture returns a caption and a 12x6 PNG: bounded in the sandbox, kept beside the trace, its
    caption in the tool result and the picture an image part of the next request, as view_image's are."""
    script = [tool_calls(("calc__picture", {})), text("<solution>42</solution>")]
    with FakeOpenAI(script) as server:
        config = fake_config(tmp_path / "m.toml", server.base_url)
        config.write_text(config.read_text().replace("vision = false", "vision = true"))
        proc = harness("run", "--dataset", _dataset(tmp_path), "--model", "fake", "--config", config,
                       "--output-dir", out, "--agent", agent, "--workers", 1, "--instance-timeout", 300,
                       "--mcp", "calc=python3 /workspace/calc_server.py")
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok", row
    messages = server.chat_requests[1]["json"]["messages"]
    (result,) = [m["content"] for m in messages if m["role"] == "tool"]
    assert "a 12x6 green rectangle" in result and "[image #1: " in result and "-shots/given-1-" in result
    parts = [p for m in messages if m["role"] == "user" and isinstance(m["content"], list) for p in m["content"]
             if p.get("type") == "image_url"]
    assert len(parts) == 1 and parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
    sent = PIL.Image.open(io.BytesIO(base64.b64decode(parts[0]["image_url"]["url"].split(",", 1)[1])))
    assert sent.size == (12, 6) and sent.getpixel((3, 3))[:3] == (10, 160, 40)  # AutoGen re-encodes it
    events = trace(out, row)
    (shown,) = [e for e in events if e["type"] == "env" and e["env"] == "image"]
    assert shown["action"] == "mcp_image" and shown["args"] == {"label": "calc__picture image 1"}
    assert png_size((out / Path(row["trace"]).parent / shown["file"]).read_bytes()) == (12, 6)
    assert "base64" not in (out / row["trace"]).read_text()


def test_a_model_without_vision_reads_an_image_part_as_its_placeholder():
    from mcp import types as mcp_types

    from harness.environments.mcp_tools import _shower, result_text

    result = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="a chart"),
                                               mcp_types.ImageContent(type="image", data="iVBORw0K",
                                                                      mime_type="image/png")])
    assert result_text(result) == "a chart\n[image content: image/png]"
    assert result_text(result, {1: "[image #3: shots/given-3.png, 1x1, shown below]"}) == (
        "a chart\n[image #3: shots/given-3.png, 1x1, shown below]")
    assert _shower(None, dry_environments(Limits())) is None  # no ImageEnv (a model that cannot see): nothing shown


@pytest.fixture
def remote_server(tmp_path):
    """calc_server.py over streamable HTTP on the host, answering only requests with the right X-Test-Key."""
    key = "mcp-canary-" + os.urandom(8).hex()
    with calc_over_http({"CALC_KEY": key}) as url:
        yield url, key


@pytest.mark.docker
def test_a_remote_server_is_reached_from_the_host_and_its_key_never_enters_the_sandbox(
        tmp_path, image, out, remote_server):
    url, key = remote_server
    look = f"env; grep -rsl {key[:20]} /workspace /tmp /proc/*/environ 2>/dev/null; echo done"
    script = [tool_calls(("remote__add", {"a": 40, "b": 2}), ("run_shell", {"command": look})),
              text("<solution>42</solution>")]
    with FakeOpenAI(script) as server:
        config = fake_config(tmp_path / "m.toml", server.base_url)
        config.write_text(config.read_text() + f'\n[mcp.remote]\nurl = "{url}"\nheader_env = {{ "X-Test-Key" = '
                                               '"CALC_TEST_KEY" }\n')
        proc = harness("run", "--dataset", _dataset(tmp_path), "--model", "fake", "--config", config,
                       "--output-dir", out, "--agent", "plain", "--workers", 1, "--instance-timeout", 300,
                       env={"CALC_TEST_KEY": key})
    assert proc.returncode == 0, explain(proc)
    assert "MCP server 'remote': 5 tool(s): remote__add," in proc.stderr  # the preflight, from the host
    (row,) = rows(out)
    assert row["status"] == "ok", row
    results = [m["content"] for m in server.chat_requests[1]["json"]["messages"] if m["role"] == "tool"]
    assert "the sum is 42" in results[0]  # the server took the key: it refuses any request without it
    assert "done" in results[1] and key not in results[1]
    assert key not in (out / row["trace"]).read_text() and key not in (out / "run.json").read_text()


@pytest.mark.docker
def test_a_remote_server_refusing_the_preflight_is_exit_2_with_its_http_error(tmp_path, image, out, remote_server):
    url, key = remote_server
    with FakeOpenAI([text("<solution>42</solution>")]) as server:
        config = fake_config(tmp_path / "m.toml", server.base_url)
        config.write_text(config.read_text() + f'\n[mcp.remote]\nurl = "{url}"\nheader_env = {{ "X-Test-Key" = '
                                               '"CALC_TEST_KEY" }\n')
        proc = harness("run", "--dataset", _dataset(tmp_path), "--model", "fake", "--config", config,
                       "--output-dir", out, "--agent", "plain", env={"CALC_TEST_KEY": "not-" + key})
    assert proc.returncode == 2, explain(proc)
    said = proc.stderr + proc.stdout
    assert "MCP server 'remote' did not start" in said, explain(proc)
    assert "it answered HTTP 401 Unauthorized: bad key" in said, explain(proc)
    assert "from this host" in said
    assert server.chat_requests == [] and not (out / "output.jsonl").exists()
    assert containers_of(out) == []


def test_the_remote_servers_missing_key_variable_is_named(tmp_path, remote_server):
    from harness.environments.mcp_tools import headers

    server = McpServer(name="remote", url=remote_server[0], header_env={"X-Test-Key": "NOT_SET_ANYWHERE_42"})
    with pytest.raises(InputError, match=r"\[mcp.remote\].*NOT_SET_ANYWHERE_42"):
        headers(server)


def test_mcp_flags_and_tables_are_checked():
    assert from_flag('calc=python3 "/workspace/my server.py" --fast') == McpServer(
        name="calc", command="python3", args=("/workspace/my server.py", "--fast"))
    for bad, said in [("calc", "NAME=COMMAND"), ("=python3 s.py", "name"), ("bad name=x", "name"),
                      ("calc=", "NAME=COMMAND"), ('calc=python3 "open', "cannot be split")]:
        with pytest.raises(InputError, match=said):
            from_flag(bad)
    toml = {"mcp": {"docs": {"url": "https://example.org/mcp", "api_key_env": "DOCS_KEY"}}}
    assert from_toml(toml, "m.toml")[0].url == "https://example.org/mcp"
    for table, said in [({"command": "x", "url": "https://e/mcp"}, "either command"), ({}, "either command"),
                        ({"command": "x", "api_key_env": "K"}, "no key may go"),
                        ({"url": "ftp://e"}, "http"), ({"command": "x", "bogus": 1}, "bogus")]:
        with pytest.raises(InputError, match=rf"\[mcp.docs\] in m.toml: .*{said}"):
            from_toml({"mcp": {"docs": table}}, "m.toml")
    with pytest.raises(InputError, match="'docs' is given twice"):
        combine(["docs=python3 s.py"], from_toml(toml, "m.toml"))


def test_a_bad_mcp_flag_exits_2_before_any_container(tmp_path):
    proc = harness("run", "--dataset", _dataset(tmp_path), "--model", "replay", "--mcp", "calc",
                   "--output-dir", tmp_path / "out")
    assert proc.returncode == 2, explain(proc)
    assert "--mcp calc: expected NAME=COMMAND" in proc.stderr + proc.stdout


def test_a_schema_tool_is_sent_with_its_own_schema_and_checked_against_it():
    async def call(arguments):
        return json.dumps(arguments)

    tool = SchemaTool("calc__add", "Add two integers.", ADD_SCHEMA, call)
    assert schema(tool) == {"type": "function", "function": {"name": "calc__add", "description": "Add two integers.",
                                                             "parameters": ADD_SCHEMA}}
    model = arguments_model(tool)
    assert model.model_validate({"a": 1, "b": 2}).model_dump() == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="'b' is a required property"):
        model.model_validate({"a": 1})
    with pytest.raises(ValueError, match="a: 'one' is not of type 'integer'"):
        model.model_validate({"a": "one", "b": 2})
    assert asyncio.run(tool(a=1, b=2)) == '{"a": 1, "b": 2}'


def test_autogen_gets_the_schema_tool_with_the_same_schema():
    from autogen_core import CancellationToken

    from harness.agents.autogen.tools import autogen_tool

    async def call(arguments):
        return f"sum {arguments['a'] + arguments['b']}"

    wrapped = autogen_tool(SchemaTool("calc__add", "Add two integers.", ADD_SCHEMA, call))
    assert wrapped.name == "calc__add" and wrapped.schema["parameters"] == ADD_SCHEMA
    assert asyncio.run(wrapped.run_json({"a": 1, "b": 2}, CancellationToken())) == "sum 3"
    with pytest.raises(ValueError, match="required property"):
        asyncio.run(wrapped.run_json({"a": 1}, CancellationToken()))
