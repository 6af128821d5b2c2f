"""What real models do, round 2 (issue 41), end to end: the real CLI, real sandboxes, and the scripted
OpenAI-compatible server (tests/fakes/openai_server.py), started by the test, replaying on three of the bundled
smoke set's tasks what a real Qwen2.5-Coder 0.5B and 1.5B wrote through a llama.cpp server:

- a tool call inside the answer tag, `<solution>{"name": ..., "arguments": ...}</solution>` (the 0.5B: the JSON
  became the answer), and an empty `<tools></tools>` before a fenced call (the 1.5B: the JSON became the
  final message): counted as text tool calls, warned of, never the answer;
- a reply cut at the server's 512-token cap (finish_reason length): counted, said at the end of the run;
- the judge rejecting a right paraphrase: its prompt and words kept in the trace, shown in the HTML row.

And an in-sandbox agent program that exits 0: its stderr kept in the trace.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness import exit_codes
from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers.e2e import (
    containers_of,
    explain,
    fake_config,
    harness,
    out_dir,
    remove_leftovers,
    rows,
    tasks_file,
    trace,
)

SMOKE = Path(__file__).resolve().parents[2] / "datasets" / "gaia-smoke"
# three of the smoke set's tasks, in its order: a CSV's, a log's, one without a file (its answer 18531)
TAGGED, FENCED, CUT = ("c4eea2af-0a09-5074-981e-18781a06799d", "d500fee3-f57f-5f9b-b9cd-4543389aaa9c",
                       "cea369f5-6545-5e4f-9006-a6e7a6c3d3f5")
IN_ANSWER_TAG = "<solution>" + json.dumps({"name": "find_in_file", "arguments": {
    "path": "/workspace/station_daily_2022.csv", "text": "2022-07"}}) + "</solution>"
AFTER_TOOLS = "<tools></tools>\n```json\n" + json.dumps({"name": "find_in_file", "arguments": {
    "path": "/workspace/web_access.log", "text": "404"}}) + "\n```"
LOOPING = "I will call the tool. " * 60
PARAPHRASE = "<solution>eighteen thousand five hundred thirty-one</solution>"
REJECT = "The candidate spells the number out; the reference is 18531.\nVERDICT: INCORRECT"


@pytest.mark.docker
def test_a_smoke_run_of_such_a_model_reports_text_calls_cut_replies_and_the_judges_words(tmp_path, image, page,
                                                                                        reliability):
    out = out_dir(tmp_path)
    tagged, fenced, cut = TAGGED, FENCED, CUT
    script = [text(IN_ANSWER_TAG),  # no answer: nothing for the judge
              *[text(AFTER_TOOLS)] * 4,  # the task and the simulated user's three replies
              text(LOOPING, usage=(300, 512), finish="length"), text(PARAPHRASE),
              text(REJECT)]  # the judge's call, in the parent, after the instance's last
    t0 = time.monotonic()
    try:
        with FakeOpenAI(script) as server:
            proc = harness("run", "--dataset", SMOKE, "--ids", ",".join((TAGGED, FENCED, CUT)),
                           "--model", "openai-compatible/fake-model-1",
                           "--model-base-url", server.base_url, "--judge-model", "openai-compatible/fake-model-1",
                           "--scorer", "gaia", "--scorer", "llm_judge", "--output-dir", out, "--agent", "plain",
                           "--workers", 1, "--instance-timeout", 120, timeout=300)
            calls = len(server.chat_requests)
        got = {row["instance_id"]: row for row in rows(out)}
        report = json.loads((out / "report.json").read_text())
        reliability.record("a model writing calls as text, cut at 512 tokens, judged by a model that rejects",
                           f"text calls {report.get('text_tool_calls')}, cut {report.get('cut_replies')}, "
                           f"{calls} calls", lost=0, leaked=len(containers_of(out)), started=t0)
        assert proc.returncode == exit_codes.OK, explain(proc)
        assert calls == len(script), (calls, explain(proc))
        assert got[tagged]["answer"] is None and got[tagged]["answer_source"] == "text_tool_call", got[tagged]
        assert got[fenced]["answer"] is None and got[fenced]["answer_source"] == "text_tool_call", got[fenced]
        assert report["text_tool_calls"] == {tagged: 1, fenced: 4}, report
        assert report["cut_replies"] == {cut: 1} and got[cut]["cut_replies"] == 1, report
        finishes = [e.get("finish_reason") for e in trace(out, got[cut]) if e["type"] == "model_call"]
        assert finishes == ["length", "stop"], finishes
        warnings = [line for line in proc.stdout.splitlines() if line.startswith("warning:")]
        assert any("were tool calls written as text" in line and "5 model replies" in line for line in warnings)
        assert any("cut at a token cap" in line and cut in line for line in warnings), warnings
        assert "replies cut at a token cap" in proc.stdout

        judged = [e for e in trace(out, got[cut]) if e["type"] == "judge_call"]
        assert len(judged) == 1 and judged[0]["reply"] == REJECT, judged
        assert "eighteen thousand" in judged[0]["messages"][0]["content"]
        assert got[cut]["scores"]["llm_judge"]["correct"] is False
        assert "judge_call" not in got[cut]["scores"]["llm_judge"]["details"]  # in the trace, not the row

        html = tmp_path / "report.html"
        assert harness("report", out, "--html", "--out", html).returncode == 0
        page.goto(html.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.click(f"#rows tbody tr[data-id='{cut}']")
        page.wait_for_selector("#trace .ev-judge_call")
        assert "VERDICT: INCORRECT" in page.inner_text("#trace .ev-judge_call")
        assert "eighteen thousand" in page.text_content("#trace .ev-judge_call details")  # the prompt, folded
        assert "the judge's reply" in page.inner_text("#trace .summary-box")
        assert not page.errors
    finally:
        assert remove_leftovers(out) == []


@pytest.mark.docker
def test_an_agent_programs_stderr_is_kept_when_it_exits_0(tmp_path, image):
    out = out_dir(tmp_path)
    iid = f"stderr-{out.name}"
    data = tasks_file(tmp_path, [iid])
    program = "sandbox:echo 'step 1: read the task' >&2; echo 'step 2: answer' >&2; echo '<solution>42</solution>'"
    try:
        with FakeOpenAI([]) as server:
            config = fake_config(tmp_path / "models.toml", server.base_url)
            proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                           "--agent", program, "--workers", 1, "--instance-timeout", 120, timeout=240)
        assert proc.returncode == exit_codes.OK, explain(proc)
        (row,) = rows(out)
        assert row["status"] == "ok" and row["answer"] == "42", row
        kept = [e for e in trace(out, row) if e["type"] == "stderr"]  # before: none
        assert len(kept) == 1 and kept[0]["exit_code"] == 0, kept
        assert "step 1: read the task\nstep 2: answer" in kept[0]["content"]
    finally:
        assert remove_leftovers(out) == []
