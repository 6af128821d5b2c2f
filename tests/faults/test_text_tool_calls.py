"""Tool calls written as text (issue 29 item 12): a server without its tool-call parser (llama.cpp
without `--jinja`, vLLM without `--tool-call-parser`) sends the model's tool call back as the reply's
content, no `tool_calls`: the agent took it for its final answer and the run for a wrong one, in
silence (a real 0.5B model through such a server: every instance).

The server is the scripted OpenAI-compatible one (tests/fakes/openai_server.py), started by the test
and answering every call, the preflight's too, with a tool call as text in the shapes such servers
send; the runs are the real CLI with the AutoGen and the plain runner, real sandboxes. Each reply is
counted (the row, report.json, the end-of-run table), the preflight and the end of the run warn, and
the blob is never the answer (answer source text_tool_call, no answer).
"""

from __future__ import annotations

import json
import time

import pytest

from harness import exit_codes
from harness.models.textcalls import text_tool_call
from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers.e2e import containers_of, explain, fake_config, harness, out_dir, remove_leftovers, rows, tasks_file

WARNING = "the server returns tool calls as text: enable its tool-call parser"
BARE = json.dumps({"name": "run_python", "arguments": {"code": "print(6 * 7)"}})  # llama.cpp without --jinja
TAGGED = f"<tool_call>\n{BARE}\n</tool_call>"  # Qwen's chat template, printed as it is


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["assistant", "plain"])
def test_tool_calls_written_as_text_are_counted_warned_and_never_the_answer(tmp_path, image, reliability, agent):
    out = out_dir(tmp_path)
    iid = f"astext-{out.name}"
    data = tasks_file(tmp_path, [iid])
    t0 = time.monotonic()
    try:
        with FakeOpenAI([text(BARE)], default=text(TAGGED), probe=text(BARE)) as server:
            config = fake_config(tmp_path / "models.toml", server.base_url)
            proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                           "--agent", agent, "--instance-timeout", 120, timeout=240)
            calls = len(server.chat_requests)
        (row,) = rows(out)
        got = json.loads((out / "report.json").read_text())
        reliability.record(f"a server returning tool calls as text ({agent} agent)",
                           f"{row.get('text_tool_calls', 0)} of {calls} replies counted as text tool calls, answer "
                           f"{row['answer']!r} ({row['answer_source']}), preflight warned: {WARNING in proc.stderr}",
                           lost=0, leaked=len(containers_of(out)), started=t0)
        assert proc.returncode == exit_codes.OK, explain(proc)
        assert row["answer"] is None and row["answer_source"] == "text_tool_call", row
        assert row["correct"] is False
        assert calls == 4 and row["text_tool_calls"] == calls, (calls, row)  # the task and 3 simulated user replies
        assert got["text_tool_calls"] == {iid: calls} and got["answer_sources"] == {"text_tool_call": 1}, got
        preflight = [line for line in proc.stderr.splitlines() if "preflight" in line and WARNING in line]
        assert len(preflight) == 1 and "run_python" in preflight[0], proc.stderr
        end = [line for line in proc.stdout.splitlines() if line.startswith("warning:") and WARNING in line]
        assert len(end) == 1 and f"{calls} model replies in 1 instance(s)" in end[0], proc.stdout
        assert "tool calls as text" in proc.stdout
    finally:
        assert remove_leftovers(out) == []


OFFERED = {"run_python", "run_shell", "visit_url"}


@pytest.mark.parametrize("content", [
    BARE, TAGGED, f"```json\n{BARE}\n```", f"[{BARE}]", f"[TOOL_CALLS]{json.dumps([json.loads(BARE)])}",
    json.dumps({"type": "function", "function": {"name": "run_shell", "arguments": "{\"command\": \"ls\"}"}}),
    json.dumps({"tool_calls": [{"function": {"name": "run_shell", "arguments": "{}"}}]}),
    json.dumps({"name": "run_python", "parameters": {"code": "1"}}) + "\n" + json.dumps({"name": "run_shell"}),
], ids=["bare", "tagged", "fenced", "list", "mistral", "openai-shape", "tool_calls", "two"])
def test_the_shapes_servers_print_are_told(content):
    assert text_tool_call(content, OFFERED) in ("run_python", "run_shell")


# What real small models wrote with the server's parser on (issue 41 item 1): Qwen2.5-Coder 0.5B put the call in
# the answer tag, the 1.5B echoed an empty tool list and then a fenced call.
FIND = json.dumps({"name": "find_in_file", "arguments": {"path": "/workspace/a.txt", "pattern": "total"}})
IN_ANSWER_TAG = f"<solution>{FIND}</solution>"
AFTER_TOOLS = f"<tools></tools>\n```json\n{FIND}\n```"


@pytest.mark.parametrize("content", [IN_ANSWER_TAG, AFTER_TOOLS, f"<tools>\n{FIND}\n</tools>",
                                     f"<solution>\n```json\n{FIND}\n```\n</solution>"],
                         ids=["in-answer-tag", "after-empty-tools", "in-tools", "fenced-in-answer-tag"])
def test_the_forms_small_models_write_are_told(content):
    assert text_tool_call(content, OFFERED | {"find_in_file"}) == "find_in_file"  # before: None


@pytest.mark.parametrize("content", [IN_ANSWER_TAG, AFTER_TOOLS])
def test_calls_of_tools_not_offered_are_answers(content):
    assert text_tool_call(content, OFFERED) is None


@pytest.mark.parametrize("content", [f"<solution>{FIND}</solution> <solution>42</solution>",
                                     f"<tools></tools> I will look. {FIND}", "<tools></tools>", "<solution></solution>",
                                     f"<solution>{json.dumps({'name': 'Paris'})}</solution>"])
def test_answers_in_those_tags_are_not_calls(content):
    assert text_tool_call(content, OFFERED | {"find_in_file"}) is None


@pytest.mark.parametrize("content", [
    "42", "<solution>42</solution>", json.dumps({"name": "Paris"}), json.dumps({"answer": 42}),
    json.dumps({"name": "run_python", "arguments": {}, "answer": 3}), f"I will call {BARE}", f"{BARE} then 42",
    "[]", json.dumps({"name": "not_offered", "arguments": {}}), f"{TAGGED} and so the answer is 42",
], ids=["number", "tagged-answer", "json-answer", "other-json", "extra-key", "prose-before", "prose-after",
        "empty-list", "not-offered", "tag-and-prose"])
def test_answers_are_not_taken_for_tool_calls(content):
    assert text_tool_call(content, OFFERED) is None
