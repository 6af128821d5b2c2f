"""A url MCP server's huge answer is bounded as it arrives (issue 29 item 8, url servers).

A stdio server's message is cut in the sandbox (test_mcp_big_result.py); a `url` server is reached by
the mcp SDK's HTTP client on the host, which read a JSON answer whole (`response.aread()`) before
parsing it: a 100 M-character result (~200 MB of JSON, its text and structured content) was held, and
parsed, in the agent's process. The real test server (tests/data/mcp/calc_server.py, the mcp SDK over
uvicorn) runs on the host, answering with JSON bodies (CALC_JSON=1) or with event streams; the plain
runner calls its `big` tool, driven by the scripted OpenAI server. The peak RSS of the run's processes
(VmHWM, read from /proc while it goes on) must stay within 64 MiB of the same run with a 10-character
result, and the model must be told at once (not at the call's 120 s timeout) that the answer was over
the limit, with its size when the server said it.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from harness.environments.mcp_bridge import MAX_MESSAGE_BYTES
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.calc_http import calc_over_http
from tests.helpers.e2e import containers_of, fake_config, out_dir, remove_leftovers, rows, trace
from tests.helpers.rss import run_watched

BIG = 100_000_000  # characters of the big result
SLACK_MIB = 64  # the most the big result may add to the run's peak RSS
PROMPT_S = 30  # the most the over-long call may take (its timeout: 120 s)


def _run(tmp_path: Path, url: str, chars: int) -> tuple[dict, str, float, int]:
    """One instance calling calc__big(chars): its row, the tool result the model got, the call's seconds
    (from the trace) and the peak VmHWM (KiB) of any process below the harness's own."""
    data = tmp_path / f"tasks-{chars}.jsonl"
    data.write_text(json.dumps({"instance_id": f"mcp-url-big-{chars}", "question": "Call big.", "answer": "42"}) + "\n")
    out = out_dir(tmp_path)
    script = [tool_calls(("calc__big", {"chars": chars})), text("<solution>42</solution>")]
    try:
        with FakeOpenAI(script) as server:
            config = fake_config(tmp_path / f"m-{chars}.toml", server.base_url, timeout=300)
            config.write_text(config.read_text() + f'\n[mcp.calc]\nurl = "{url}"\n')
            peak = run_watched("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                               "--agent", "plain", "--instance-timeout", 300, log=tmp_path / f"stdout-{chars}")
            result = next(m["content"] for m in server.chat_requests[1]["json"]["messages"] if m["role"] == "tool")
        (row,) = rows(out)
        (call,) = [e for e in trace(out, row) if e.get("action") == "calc__big"]
        assert containers_of(out) == []
        return row, result, call["seconds"], peak
    finally:
        remove_leftovers(out)


@pytest.mark.docker
# A JSON body is refused by its Content-Length or as it arrives, an event stream only as it arrives: the stream
# stays in the default run, the JSON body is slow.
@pytest.mark.parametrize("answers", [pytest.param("json", marks=pytest.mark.slow), "event stream"])
def test_a_url_servers_huge_answer_is_refused_as_it_arrives(tmp_path, image, reliability, answers):
    t0 = time.monotonic()
    with calc_over_http({"CALC_JSON": "1" if answers == "json" else "0"}) as url:
        _, small, _, small_peak = _run(tmp_path, url, 10)
        assert small == "x" * 10
        row, big, seconds, big_peak = _run(tmp_path, url, BIG)
    grown_mib = (big_peak - small_peak) / 1024
    reliability.record(f"a url MCP server's {BIG // 1_000_000} M-character result ({answers})",
                       f"the model told in {seconds:.1f} s: {big[-160:]!r}; peak RSS {big_peak // 1024} MiB "
                       f"({grown_mib:+.0f} MiB against a 10-character result)", started=t0)
    assert grown_mib < SLACK_MIB, (big_peak, small_peak)
    assert seconds < PROMPT_S, seconds
    assert row["status"] == "ok" and row["correct"] is True, row
    assert len(big) < 2000 and "MCP server 'calc' could not answer" in big, big[:2000]
    if answers == "json":  # its Content-Length said how big it was
        found = re.search(rf"the server's answer had (\d+) bytes, more than the {MAX_MESSAGE_BYTES}", big)
        assert found and int(found.group(1)) > 2 * BIG, big
    else:  # the SDK's own bound on one event, given the same limit
        assert f"exceeded the {MAX_MESSAGE_BYTES} byte limit" in big, big
