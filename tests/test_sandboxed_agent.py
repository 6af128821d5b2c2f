"""`--agent sandbox:COMMAND` (harness/agents/sandboxed/): an agent program of our own
(tests/data/sandboxed/agent.py, urllib on the OpenAI wire format) inside a real sandbox, its model
calls relayed to the per-instance proxy on the host, against the replay model and the fake OpenAI
server; and the proxy itself driven by the real `openai` and `anthropic` clients on the host.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import anthropic
import openai
import pytest

from harness.agents.registry import load_runner
from harness.agents.sandboxed.proxy import ModelProxy
from harness.agents.sandboxed.runner import SandboxedRunner
from harness.agents.sandboxed.tools import ToolServer
from harness.errors import InfraError, InputError, LimitExceeded
from harness.models.chat import ReplayChat
from harness.models.config import ModelSection
from harness.models.meter import Meter
from harness.traces import ToolCall, Tracer
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import DATA, FAKE_KEY, REPO, SUM, explain, fake_config, harness, one_instance, rows, trace

GAIA2_SMOKE = REPO / "datasets" / "gaia2-smoke"

AGENT = DATA / "sandboxed" / "agent.py"
# The smoke recording's two wrong answers: the ferry timetable's 17:05 (15:40 is right) and a final
# message without <solution> ("The answer is Dalia Chen.", read whole: not the bare name).
RECORDED_WRONG = {"964d85c4-677b-56b1-946d-d39b4af02e50", "5a79f795-8c1f-5451-9f49-e9fd38daa1f9"}
SANDBOXED = f"sandbox:python3 @{AGENT.relative_to(REPO)}"


def _run(tmp_path: Path, data: Path, config: Path, model: str, out: Path, agent: str = SANDBOXED, *flags):
    return harness("run", "--dataset", data, "--model", model, "--config", config, "--output-dir", out,
                   "--agent", agent, "--workers", 1, "--instance-timeout", 120, *flags)


# ------------------------------------------------------------------ in a real sandbox
@pytest.mark.docker
def test_the_agent_program_solves_an_instance_against_the_replay_model(tmp_path, image, out):
    data, config = one_instance(tmp_path, SUM)
    proc = _run(tmp_path, data, config, "rec", out)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is True and row["answer"] == "6", row
    assert row["usage"]["llm_calls"] == 2 and row["steps"] == 2
    assert row["tool_calls"] == ["run_python"]  # the proxied reply's call, as the built-in agents' rows say
    events = trace(out, row)
    calls = [e for e in events if e["type"] == "model_call"]
    assert len(calls) == 2
    # The program ran the recorded pandas call itself, in the sandbox: its output went back to the model.
    assert any(m["role"] == "tool" and m["content"].startswith("6") for m in calls[1]["messages"]), calls[1]
    assert [e["content"].strip() for e in events if e["type"] == "message"] == ["Done.\n<SOLUTION>\n6\n</Solution>"]


def _listed(events: list[dict]) -> list[str]:
    """The tools the program was given over MCP, as its answer (the last `message`) names them."""
    answer = [e["content"] for e in events if e["type"] == "message"][-1]
    return answer.rsplit("tools: ", 1)[1].strip().split(", ")


@pytest.mark.docker
def test_the_program_runs_the_harness_tools_over_mcp_and_the_trace_records_each_call_once(tmp_path, image, out):
    """`--mcp`: the program's tools are the plain runner's (listed from $HARNESS_MCP_URL), and the model's
    run_python runs there: in the sandbox, through the harness's tool function, traced as the model's call."""
    data, config = one_instance(tmp_path, SUM)
    proc = _run(tmp_path, data, config, "rec", out, f"{SANDBOXED} --mcp")
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is True and row["answer"] == "6", row
    assert row["tool_calls"] == ["run_python"]  # the model's call, not counted again when it ran over MCP
    events = trace(out, row)
    (called,) = [e for e in events if e["type"] == "tool_call"]
    (result,) = [e for e in events if e["type"] == "tool_result"]
    assert (result["name"], result["call_id"], result["is_error"]) == ("run_python", called["call_id"], False)
    assert result["content"] == "exit code: 0\nstdout:\n6\n", result  # the harness's run_python, in the sandbox
    listed = _listed(events)
    assert {"run_python", "run_shell", "list_files", "read_file"} <= set(listed), listed
    assert not any("__" in name for name in listed), listed  # no Gaia2 app on a plain instance
    (offered,) = [e for e in events if e["type"] == "tools"]  # traced once: the tools the server lists
    assert [d["function"]["name"] for d in offered["tools"]] == listed


@pytest.mark.docker
def test_an_in_sandbox_agent_plays_a_gaia2_scenario_through_its_apps_over_mcp(tmp_path):
    """proto_find_image_file: the program gets the scenario's apps alone (ARE's App__function names, no code
    tool) and the model's send_message_to_user runs in ARE through the harness's Gaia2 tools: ARE passes it."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "proto_find_image_file.json").write_text((GAIA2_SMOKE / "proto_find_image_file.json").read_text())
    say = {"name": "AgentUserInterface__send_message_to_user",
           "arguments": {"content": "The image file is `llama.jpg`"}}
    (data / "replay.jsonl").write_text(json.dumps({"instance_id": "proto_find_image_file", "turns": [
        {"tool_calls": [say]}, {"content": "Done."}]}) + "\n")
    out = tmp_path / "run"
    proc = harness("run", "--dataset", data, "--agent", f"{SANDBOXED} --mcp", "--model", "replay", "--scorer", "gaia2",
                   "--epochs", "1", "--max-retries", "0", "--output-dir", out)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    verdict = row["verdicts"]["gaia2"]
    assert row["status"] == "ok" and row["correct"] is True and verdict["verdict"] == "pass", (row, verdict)
    assert all(action["matched"] for action in verdict["oracle_actions"]), verdict
    assert row["tool_calls"] == [say["name"]]
    events = trace(out, row)
    (result,) = [e for e in events if e["type"] == "tool_result"]
    assert result["name"] == say["name"] and not result["is_error"], result
    assert [e["type"] for e in events].count("env") == 1  # ARE's own record of the action, as for any runner
    listed = _listed(events)
    assert {say["name"], "SandboxLocalFileSystem__ls", "SystemApp__get_current_time"} <= set(listed), listed
    assert all("__" in name for name in listed), listed  # its apps alone: no code, file or browser tool
    (offered,) = [e for e in events if e["type"] == "tools"]
    assert [d["function"]["name"] for d in offered["tools"]] == listed


@pytest.mark.docker
def test_the_fake_server_is_called_with_the_hosts_key_which_never_enters_the_sandbox(tmp_path, image, out):
    """The secret canary for the proxy: the sandbox holds only the instance's token."""
    data, _ = one_instance(tmp_path, SUM)
    half = len(FAKE_KEY) // 2  # the command's own text must not hold the key it looks for
    look = (f"K={FAKE_KEY[:half]}; grep -rsl \"$K{FAKE_KEY[half:]}\" /workspace /tmp /home /proc/*/environ;"
            " echo looked; env")
    script = [tool_calls(("run_shell", {"command": look}), usage=(120, 15)),
              text("<solution>6</solution>", usage=(200, 8))]
    with FakeOpenAI(script) as server:
        proc = _run(tmp_path, data, fake_config(tmp_path / "m.toml", server.base_url, prices=(1.0, 2.0)), "fake", out,
                    SANDBOXED + " --env-dump")
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is True, row
    assert row["usage"]["prompt_tokens"] == 320 and row["usage"]["completion_tokens"] == 23
    assert row["usage"]["cost"] == pytest.approx((320 * 1.0 + 23 * 2.0) / 1000)
    assert len(server.chat_requests) == 2
    for request in server.chat_requests:  # the host's key and the configured model, whatever the agent sent
        assert request["headers"]["authorization"] == f"Bearer {FAKE_KEY}"
        assert request["json"]["model"] == "fake-model-1"
    looked = next(m["content"] for m in server.chat_requests[1]["json"]["messages"] if m["role"] == "tool")
    assert looked.startswith("looked\n") and FAKE_KEY not in looked, looked  # grep found no file holding the key
    given = json.loads(next(e["content"] for e in trace(out, row) if e["type"] == "message").splitlines()[0])
    assert given["OPENAI_BASE_URL"].startswith("http://127.0.0.1:") and given["HARNESS_MODEL"] == "fake-model-1"
    assert given["OPENAI_API_KEY"] == given["ANTHROPIC_API_KEY"] and FAKE_KEY not in json.dumps(given)
    assert FAKE_KEY not in (out / row["trace"]).read_text() and FAKE_KEY not in (out / "run.json").read_text()


@pytest.mark.docker
def test_max_steps_stops_the_program_and_ends_as_a_limit(tmp_path, image, out):
    loop = [{"tool_calls": [{"name": "run_python", "arguments": {"code": "print(1)"}}]}] * 5 + SUM[1:]
    data, config = one_instance(tmp_path, loop)
    proc = _run(tmp_path, data, config, "rec", out, SANDBOXED, "--max-steps", 2)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "limit" and row["limit"] == "max_steps", row
    assert row["usage"]["llm_calls"] == 2
    assert [e["limit"] for e in trace(out, row) if e["type"] == "limit"] == ["max_steps"]


@pytest.mark.docker
def test_an_answer_file_is_read_and_a_failing_program_is_an_agent_error(tmp_path, image):
    data, config = one_instance(tmp_path, SUM)
    written, failing = tmp_path / "written", tmp_path / "failing"
    assert _run(tmp_path, data, config, "rec", written, SANDBOXED + " --answer-file").returncode == 0
    (row,) = rows(written)
    assert row["status"] == "ok" and row["answer"] == "6", row
    proc = _run(tmp_path, data, config, "rec", failing, "sandbox:echo half-way; echo broken >&2; exit 4")
    (row,) = rows(failing)
    assert row["status"] == "error" and row["error_kind"] == "agent", row
    assert "exited with code 4" in row["error"] and "broken" in row["error"], (row, explain(proc))


ABANDONS = r'''
import json, os, socket, urllib.parse, urllib.request
where = urllib.parse.urlsplit(os.environ["OPENAI_BASE_URL"])
key = os.environ["OPENAI_API_KEY"]

def abandon(body, sent):
    # a request whose connection closes after `sent` bytes of its body: it never waits for an answer
    head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n"
            "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n" % (key, len(body)))
    with socket.create_connection((where.hostname, where.port)) as conn:
        conn.sendall(head.encode() + body[:sent])

whole = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 50000}]}).encode()
for _ in range(4):
    abandon(whole, len(whole) // 2)  # half its body
    abandon(b"{}", 2)  # its whole body (one the proxy refuses, no model call), then gone
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", headers={
    "Content-Type": "application/json", "Authorization": "Bearer " + key},
    data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode())
print(json.load(urllib.request.urlopen(request, timeout=60))["choices"][0]["message"]["content"])
'''


@pytest.mark.docker
def test_requests_the_program_abandons_are_dropped_and_its_answer_kept(tmp_path, image, out):
    """Requests the program opens and closes mid-body, or right after its body, never to read an answer: each is
    dropped, the instance goes on (each was an `agent` error, the answer lost: the relay had the request without its
    body)."""
    program = tmp_path / "abandons.py"
    program.write_text(ABANDONS)
    data, config = one_instance(tmp_path, [{"content": "<solution>6</solution>"}])
    proc = _run(tmp_path, data, config, "rec", out, f"sandbox:python3 @{program}")
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["answer"] == "6" and row["correct"] is True, row
    assert row["usage"]["llm_calls"] == 1, row  # the abandoned requests called no model


@pytest.mark.docker
@pytest.mark.slow
def test_the_smoke_set_runs_offline_through_the_in_sandbox_agent(tmp_path, image, out):
    """Every recorded answer comes back through the program. The set has 21 tasks (18 before the
    search, image and audio tasks were added): 20 end `ok`; the image task's recording answers only
    a request that carries the chart's picture (`needs_image`) and our small program sends text
    only, so the replay ends it as a model error. 18 are correct: the 19 a built-in agent gets
    (tests/test_run_e2e.py) less the chart; the other two are the recording's own wrong answers."""
    smoke = REPO / "datasets" / "gaia-smoke"
    proc = harness("run", "--dataset", smoke, "--model", "replay", "--website", smoke / "website",
                   "--output-dir", out, "--agent", SANDBOXED, "--workers", 2, "--instance-timeout", 300)
    assert proc.returncode == 3, explain(proc)  # the one errored instance
    recorded = [json.loads(line) for line in (smoke / "replay.jsonl").read_text().splitlines()]
    pictured = {r["instance_id"] for r in recorded if any(t.get("needs_image") for t in r["turns"])}
    got = {r["instance_id"]: r for r in rows(out)}
    assert len(got) == len(recorded) == 21 and len(pictured) == 1
    assert {i for i, r in got.items() if r["status"] != "ok"} == pictured, explain(proc)
    assert all("image" in got[i]["error"] and got[i]["error_kind"] == "model" for i in pictured)
    for iid, row in got.items():  # the recording's own final answer, wrong ones included
        if iid not in pictured:
            final = next(r for r in recorded if r["instance_id"] == iid)["turns"][-1]["content"]
            assert row["usage"]["llm_calls"] == len(next(r for r in recorded if r["instance_id"] == iid)["turns"])
            assert row["answer"] in final, (iid, row["answer"], final)
    assert {i for i, r in got.items() if not r["correct"]} == pictured | RECORDED_WRONG
    assert sum(bool(r["correct"]) for r in got.values()) == 18


# ------------------------------------------------------------------ the proxy, with the real clients
def _section(tmp_path: Path) -> ModelSection:
    return ModelSection(name="rec", model="recorded-1", kind="replay", path=str(tmp_path / "unused.jsonl"))


def _proxied(tmp_path: Path, turns: list[dict], client_calls, *, max_steps: int | None = None):
    """Run `client_calls(proxy)` (a coroutine function) against a proxy over a ReplayChat of `turns`."""
    async def main():
        meter = Meter(max_tokens=None, max_steps=max_steps, tracer=Tracer(tmp_path / "trace.jsonl"))
        chat = ReplayChat(_section(tmp_path), meter, turns)
        proxy = ModelProxy(chat, "tok-123", "recorded-1")
        proxy.start()
        try:
            return await client_calls(proxy), proxy, meter
        finally:
            proxy.close()

    return asyncio.run(main())


CALL_THEN_TEXT = [{"tool_calls": [{"name": "run_python", "arguments": {"code": "print(2)"}}],
                   "usage": {"prompt_tokens": 11, "completion_tokens": 3}},
                  {"content": "<solution>2</solution>", "usage": {"prompt_tokens": 20, "completion_tokens": 4}}]


def test_the_openai_client_talks_to_the_proxy_plain_and_streaming(tmp_path):
    async def calls(proxy):
        client = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key="tok-123", max_retries=0)
        first = await client.chat.completions.create(model="anything", messages=[{"role": "user", "content": "2?"}])
        chunks = [c async for c in await client.chat.completions.create(
            model="anything", messages=[{"role": "user", "content": "2?"}], stream=True,
            stream_options={"include_usage": True})]
        models = await client.models.list()
        with pytest.raises(openai.AuthenticationError):
            await openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-wrong", max_retries=0).models.list()
        return first, chunks, models

    (first, chunks, models), _, meter = _proxied(tmp_path, CALL_THEN_TEXT, calls)
    call = first.choices[0].message.tool_calls[0]
    assert first.model == "recorded-1" and first.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "run_python" and json.loads(call.function.arguments) == {"code": "print(2)"}
    assert first.usage.prompt_tokens == 11 and first.usage.completion_tokens == 3
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "<solution>2</solution>"
    assert chunks[-1].usage.completion_tokens == 4
    assert [m.id for m in models.data] == ["recorded-1"]
    assert meter.calls == 2 and meter.totals.prompt_tokens == 31
    events = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert [e["type"] for e in events].count("model_call") == 2


def test_the_proxied_replies_tool_calls_are_traced_as_tool_call_events(tmp_path):
    """Both wire formats: each tool call a reply carries is a `tool_call` event (the row's
    `tool_calls`, through Tracer.tool_calls) with the id the program got; a text reply adds none."""
    async def calls(proxy):
        openai_client = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key="tok-123", max_retries=0)
        first = await openai_client.chat.completions.create(model="m", messages=[{"role": "user", "content": "2?"}])
        anthropic_client = anthropic.AsyncAnthropic(base_url=proxy.url, api_key="tok-123", max_retries=0)
        second = await anthropic_client.messages.create(model="m", max_tokens=10,
                                                        messages=[{"role": "user", "content": "2?"}])
        third = await openai_client.chat.completions.create(model="m", messages=[{"role": "user", "content": "2?"}])
        return first.choices[0].message.tool_calls[0].id, second.content[0].id, third

    turns = [CALL_THEN_TEXT[0], {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}},
                                                {"name": "run_shell", "arguments": {"command": "ls"}}]},
             CALL_THEN_TEXT[1]]
    (first_id, second_id, third), proxy, meter = _proxied(tmp_path, turns, calls)
    assert third.choices[0].message.content == "<solution>2</solution>"
    assert meter.tracer.tool_calls == ["run_python", "read_file", "run_shell"]
    events = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    called = [e for e in events if e["type"] == "tool_call"]
    assert [(e["source"], e["name"], e["arguments"]) for e in called] == [
        ("sandbox", "run_python", {"code": "print(2)"}), ("sandbox", "read_file", {"path": "a.txt"}),
        ("sandbox", "run_shell", {"command": "ls"})]
    assert called[0]["call_id"] == first_id and called[1]["call_id"] == second_id
    kinds = [e["type"] for e in events if e["type"] in ("model_call", "tool_call")]
    assert kinds == ["model_call", "tool_call", "model_call", "tool_call", "tool_call", "model_call"]


def test_the_anthropic_client_talks_to_the_proxy(tmp_path):
    async def calls(proxy):
        client = anthropic.AsyncAnthropic(base_url=proxy.url, api_key="tok-123", max_retries=0)
        tools = [{"name": "run_python", "description": "Python", "input_schema": {
            "type": "object", "properties": {"code": {"type": "string"}}}}]
        first = await client.messages.create(model="claude-x", max_tokens=100, system="be brief", tools=tools,
                                             messages=[{"role": "user", "content": "2?"}])
        use = first.content[0]
        second = await client.messages.create(model="claude-x", max_tokens=100, tools=tools, messages=[
            {"role": "user", "content": "2?"},
            {"role": "assistant",
             "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "2"}]}])
        return first, second

    (first, second), _, _ = _proxied(tmp_path, CALL_THEN_TEXT, calls)
    assert first.stop_reason == "tool_use" and first.content[0].input == {"code": "print(2)"}
    assert first.usage.input_tokens == 11
    assert second.stop_reason == "end_turn" and second.content[0].text == "<solution>2</solution>"
    model_calls = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()
                   if '"model_call"' in line]
    # The Messages request reached the model in the chat format: the tool result as a tool message.
    assert [(m["role"], m["content"]) for m in model_calls[1]["messages"]] == [("tool", "2")]


def test_the_anthropic_client_streams_from_the_proxy_a_tool_use_then_text(tmp_path):
    """`messages.stream` (as Claude Code and the SDK's helpers use): the server-sent events the SDK
    accumulates into the same message as a plain call, a tool_use's input carried as input_json_delta."""
    async def calls(proxy):
        client = anthropic.AsyncAnthropic(base_url=proxy.url, api_key="tok-123", max_retries=0)
        tools = [{"name": "run_python", "description": "Python", "input_schema": {
            "type": "object", "properties": {"code": {"type": "string"}}}}]
        finals, kinds = [], []
        for _ in CALL_THEN_TEXT:
            async with client.messages.stream(model="claude-x", max_tokens=100, tools=tools,
                                              messages=[{"role": "user", "content": "2?"}]) as stream:
                kinds.append([event.type async for event in stream])
                finals.append(await stream.get_final_message())
        return finals, kinds

    ((first, second), (used, said)), _, meter = _proxied(tmp_path, CALL_THEN_TEXT, calls)
    assert first.stop_reason == "tool_use" and first.model == "recorded-1"
    (use,) = first.content
    assert use.type == "tool_use" and use.name == "run_python" and use.input == {"code": "print(2)"}
    assert use.id.startswith("call_")
    assert (first.usage.input_tokens, first.usage.output_tokens) == (11, 3)
    assert "input_json" in used and "text" not in used  # the SDK's own event for an input_json_delta
    assert second.stop_reason == "end_turn" and [b.text for b in second.content] == ["<solution>2</solution>"]
    assert (second.usage.input_tokens, second.usage.output_tokens) == (20, 4)
    assert said[0] == "message_start" and "text" in said and said[-1] == "message_stop"
    assert meter.calls == 2


def test_a_budget_reached_ends_the_proxy_with_the_limit_and_is_not_retried(tmp_path):
    async def calls(proxy):
        client = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key="tok-123")  # retries on, as agents have
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "2?"}])
        with pytest.raises(openai.BadRequestError, match="max_steps"):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "2?"}])
        with pytest.raises(openai.BadRequestError, match="has ended"):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "2?"}])

    _, proxy, meter = _proxied(tmp_path, CALL_THEN_TEXT, calls, max_steps=1)
    assert isinstance(proxy.stopped, LimitExceeded) and proxy.stopped.limit == "max_steps"
    assert meter.calls == 1 and proxy.calls == 2  # the refused request was one attempt, not retried


async def _add(a: int, b: int) -> str:
    """Add two whole numbers."""
    return str(a + b)


async def _gone() -> str:
    """A tool whose sandbox has died."""
    raise InfraError("the sandbox is gone")


def test_the_tool_server_lists_and_runs_the_tools_and_traces_each_call_once(tmp_path):
    """ToolServer on the host, spoken to as the relay hands it requests: the instance's token only; a call
    the model asked for answers that call (one tool_result under its id), any other is traced as the
    program's own; a bad call is an error result; a dead sandbox stops the instance."""
    tracer = Tracer(tmp_path / "trace.jsonl")
    asked = [ToolCall(source="sandbox", name="_add", arguments={"a": 1, "b": 2}, call_id="c1")]

    server = ToolServer([_add, _gone], "tok", tracer, asked)

    async def session():
        await server.start()
        ids = iter(range(1, 100))

        async def post(method, params, token="tok"):
            body = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
            headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}",
                       "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
            answer = await server.answer({"method": "POST", "path": "/mcp", "body": json.dumps(body).encode(),
                                          "headers": headers})
            return answer["status"], json.loads(answer["body"])

        try:
            refused = await post("tools/list", {}, token="other")
            await post("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "t", "version": "1"}})
            listed = await post("tools/list", {})
            calls = [await post("tools/call", {"name": "_add", "arguments": arguments})
                     for arguments in ({"a": 1, "b": 2}, {"a": 1, "b": 2}, {"a": "x", "b": 2})]
            gone = await post("tools/call", {"name": "_gone", "arguments": {}})
            stream = await asyncio.wait_for(server.answer({"method": "GET", "path": "/mcp", "body": b"", "headers": {
                "Authorization": "Bearer tok", "Accept": "text/event-stream"}}), 30)  # no stream: refused at once
            return refused, listed, calls, gone, server.stopped, stream
        finally:
            await server.close()

    refused, listed, calls, gone, stopped, stream = asyncio.run(session())
    assert refused[0] == 401 and stream["status"] == 405
    tools = {t["name"]: t for t in listed[1]["result"]["tools"]}
    assert sorted(tools) == ["_add", "_gone"] and tools["_add"]["description"] == "Add two whole numbers."
    assert tools["_add"]["inputSchema"]["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert [(d["function"]["name"], d["function"]["description"], d["function"]["parameters"])
            for d in server.definitions] == [(t["name"], t["description"], t["inputSchema"]) for t in tools.values()]
    results = [c[1]["result"] for c in calls]
    assert [(r["content"][0]["text"], r["isError"]) for r in results[:2]] == [("3", False), ("3", False)]
    assert results[2]["isError"] and "bad arguments for _add" in results[2]["content"][0]["text"]
    assert gone[1]["result"]["isError"] and isinstance(stopped, InfraError)
    events = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert asked == []  # the model's call was run
    assert [(e["type"], e.get("call_id")) for e in events] == [
        ("tool_result", "c1"), ("tool_call", "mcp-1"), ("tool_result", "mcp-1"), ("tool_call", "mcp-2"),
        ("tool_result", "mcp-2"), ("tool_call", "mcp-3"), ("tool_result", "mcp-3")]
    assert tracer.tool_calls == ["_add", "_add", "_gone"]  # the program's own (the proxy traced the model's)


def test_sandbox_agents_are_checked_at_load():
    runner, command = load_runner(SANDBOXED.replace("@" + str(AGENT.relative_to(REPO)), "@" + str(AGENT)))
    assert runner is SandboxedRunner and command.files == (AGENT,)
    assert load_runner("sandbox:my-agent --fast")[1].files == ()
    with pytest.raises(InputError, match="--agent sandbox:python3 @no/such.py: .*is not a file"):
        load_runner("sandbox:python3 @no/such.py")
    with pytest.raises(InputError, match="no command"):
        load_runner("sandbox: ")


def test_a_reply_cut_at_the_token_cap_reaches_the_program_as_cut_in_both_wire_formats(tmp_path):
    """The model's `length` stop is passed on (OpenAI's finish_reason, plain and streamed; Anthropic's stop_reason
    max_tokens), so a program can tell a cut reply from a finished one (before: every text reply said stop)."""
    cut = {"content": "The answer is 2", "usage": {"prompt_tokens": 9, "completion_tokens": 512},
           "finish_reason": "length"}

    async def calls(proxy):
        client = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key="tok-123", max_retries=0)
        plain = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "2?"}])
        chunks = [c async for c in await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "2?"}], stream=True)]
        anthropic_client = anthropic.AsyncAnthropic(base_url=proxy.url, api_key="tok-123", max_retries=0)
        message = await anthropic_client.messages.create(model="m", max_tokens=10,
                                                         messages=[{"role": "user", "content": "2?"}])
        finished = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "2?"}])
        return plain, chunks, message, finished

    (plain, chunks, message, finished), _, _ = _proxied(
        tmp_path, [cut, cut, cut, {"content": "2", "usage": {}, "finish_reason": "stop"}], calls)
    assert plain.choices[0].finish_reason == "length"
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert message.stop_reason == "max_tokens"
    assert finished.choices[0].finish_reason == "stop"
