"""A huge MCP tool result is bounded before anyone holds it whole (issue 29 item 8: a 100 MB result
took the agent's process to 600 MB; the text shown to the model was cut at MAX_RESULT_CHARS, but only
after the whole message had been read, joined and parsed).

The real test server (tests/data/mcp/calc_server.py, the mcp SDK) runs in a real sandbox through the
bridge; its `big` tool answers 100 M characters (its message, text and structured content, ~200 MB).
The plain runner calls it, driven by the scripted OpenAI server. The model must get a bounded result
that says it was cut, and the peak RSS of the run's processes (the agent's above all: VmHWM, read from
/proc while the run goes on) must stay within 64 MiB of the same run with a 10-character result.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from harness.environments.mcp_tools import MAX_RESULT_CHARS
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import DATA, containers_of, fake_config, out_dir, remove_leftovers, rows
from tests.helpers.rss import run_watched

BIG = 100_000_000  # characters of the big result
SLACK_MIB = 64  # the most the big result may add to the run's peak RSS


def _run(tmp_path: Path, chars: int) -> tuple[dict, str, int]:
    """One instance calling calc__big(chars): its row, the tool result the model got, the peak VmHWM (KiB)
    of any process below the harness's own."""
    folder = tmp_path / f"data-{chars}"
    folder.mkdir()
    (folder / "calc_server.py").write_text((DATA / "mcp" / "calc_server.py").read_text())
    data = folder / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": f"mcp-big-{chars}", "question": "Call big.", "answer": "42",
                                "files": ["calc_server.py"]}) + "\n")
    out = out_dir(tmp_path)
    script = [tool_calls(("calc__big", {"chars": chars})), text("<solution>42</solution>")]
    try:
        with FakeOpenAI(script) as server:
            config = fake_config(tmp_path / f"m-{chars}.toml", server.base_url, timeout=300)
            peak = run_watched("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                               "--agent", "plain", "--mcp", "calc=python3 /workspace/calc_server.py",
                               "--instance-timeout", 300, log=tmp_path / f"stdout-{chars}")
            result = next(m["content"] for m in server.chat_requests[1]["json"]["messages"] if m["role"] == "tool")
        (row,) = rows(out)
        assert containers_of(out) == []
        return row, result, peak
    finally:
        remove_leftovers(out)


@pytest.mark.docker
def test_a_huge_mcp_result_is_cut_in_the_sandbox_and_never_held_whole(tmp_path, image, reliability):
    t0 = time.monotonic()
    _, small, small_peak = _run(tmp_path, 10)
    assert small == "x" * 10
    row, big, big_peak = _run(tmp_path, BIG)
    grown_mib = (big_peak - small_peak) / 1024
    reliability.record(f"an MCP tool result of {BIG // 1_000_000} M characters (~200 MB message)",
                       f"{len(big)} characters shown, marked cut; peak RSS {big_peak // 1024} MiB "
                       f"({grown_mib:+.0f} MiB against a 10-character result)", started=t0)
    assert grown_mib < SLACK_MIB, (big_peak, small_peak)  # was +979 MiB (1079 MiB at the peak)
    assert row["status"] == "ok" and row["correct"] is True, row
    assert len(big) <= MAX_RESULT_CHARS and big.startswith("x" * 10_000), big[:200]
    assert re.search(r"the server's answer had (\d+) bytes", big[-300:]), big[-300:]
    assert int(re.search(r"had (\d+) bytes", big).group(1)) > 2 * BIG  # its text and structured content


def test_the_hosts_reader_never_holds_a_line_past_its_limit():
    """Agent code may write the bridge's output file itself: a line over the limit is dropped as it arrives."""
    from harness.environments.mcp_bridge import Lines, McpMessageTooLarge

    lines = Lines(10)
    got = lines.feed(b'{"a":1}\n{"b":') + lines.feed(b"x" * 20) + lines.feed(b"y" * 5) + lines.feed(b'}\n{"c":3}\n{"d"')
    assert got[0] == b'{"a":1}' and isinstance(got[1], McpMessageTooLarge) and got[2:] == [b'{"c":3}']
    assert len(lines.buffer) <= 10 and lines.feed(b":4}\n") == [b'{"d":4}']
