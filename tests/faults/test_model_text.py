"""What a model sends is data (issue 29 item 5): a reply holding a lone surrogate (`"\\udc80"`, valid
JSON; Python decodes it to a str UTF-8 cannot encode) crashed `harness run` with exit 1 and a
traceback, and the instance had no row (the row's JSON could not be written).

The model is the scripted OpenAI-compatible server (tests/fakes/openai_server.py) driven by the real
clients (the official OpenAI client of the plain runner, AutoGen's); the runs are the real CLI on real
sandboxes. The writers are also tested alone, with a row holding surrogates in every field (text that
reached a row another way than a model's reply: an agent's output, a tool's).
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from harness import exit_codes
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import containers_of, explain, fake_config, harness, out_dir, remove_leftovers, rows, trace

LONE = "\udc80"
FFFD = "\ufffd"

# a tool call whose code holds one, then an answer holding one
REPLY = [tool_calls(("run_python", {"code": f"print('a{LONE}b')"})), text(f"so {LONE} <solution>4{LONE}2</solution>")]


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["assistant", "plain"])
def test_a_lone_surrogate_from_the_model_ends_the_instance_as_one_row(tmp_path, image, reliability, agent):
    iid = f"lone-{out_dir(tmp_path).name}"
    (tmp_path / "data").mkdir()
    data = tmp_path / "data" / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": iid, "question": "What is 6*7?", "answer": "42"}) + "\n")
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    try:
        with FakeOpenAI(REPLY) as server:
            config = fake_config(tmp_path / "models.toml", server.base_url)
            proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                           "--agent", agent, "--instance-timeout", 120, timeout=240)
        got = rows(out) if (out / "output.jsonl").exists() else []
        reliability.record(f"model reply holding a lone surrogate ({agent} agent)",
                           f"exit {proc.returncode}, one row {got[0]['status'] if got else 'missing'}; the code ran, "
                           "answer and trace hold U+FFFD", lost=0 if len(got) == 1 else 1,
                           leaked=len(containers_of(out)), started=t0)
        assert "Traceback" not in proc.stderr, explain(proc)
        (row,) = got
        assert proc.returncode == exit_codes.OK, explain(proc)
        assert row["status"] == "ok" and row["answer"] == f"4{FFFD}2" and row["correct"] is False, row
        results = [e for e in trace(out, row) if e["type"] == "tool_result"]
        assert results and f"a{FFFD}b" in results[0]["content"] and not results[0]["is_error"], results
        assert "\\udc80" not in (out / row["trace"]).read_text()  # not even as a JSON escape
        assert json.loads((out / "report.json").read_text())["n_selected"] == 1
        page = harness("report", out, "--html", "--out", tmp_path / "report.html", timeout=120)
        assert page.returncode == 0, explain(page)
    finally:
        assert remove_leftovers(out) == []


def test_rows_traces_reports_and_the_terminal_take_lone_surrogates(tmp_path):
    """Every writer, given text holding lone surrogates from anywhere: the row (output.jsonl), the
    trace, report.json, the report's table and a terminal message."""
    from rich.console import Console

    from harness.report import build_report, render, write_report
    from harness.results.model import ResultRow
    from harness.results.store import append_row, read_rows
    from harness.terminal import say
    from harness.traces.events import Message, Tracer, read_events

    row = ResultRow(instance_id=f"i{LONE}", status="error", error_kind="agent", error=f"agent said {LONE}",
                    answer=f"4{LONE}2", target="42", tool_calls=[f"t{LONE}"],
                    scores={"gaia": {"correct": False, "details": {f"k{LONE}": f"v{LONE}"}}})
    append_row(tmp_path / "output.jsonl", row)
    (back,) = read_rows(tmp_path / "output.jsonl")
    assert back.answer == f"4{FFFD}2" and back.error == f"agent said {FFFD}", back
    assert back.scores["gaia"]["details"] == {f"k{FFFD}": f"v{FFFD}"}

    tracer = Tracer(tmp_path / "trace.jsonl")
    tracer.emit(Message(source="agent", content=f"x{LONE}y"))
    tracer.close()
    assert [e["content"] for e in read_events(tmp_path / "trace.jsonl") if e["type"] == "message"] == [f"x{FFFD}y"]

    report = build_report([row], [row.instance_id], leaked_containers=0)
    write_report(report, tmp_path)
    assert json.loads((tmp_path / "report.json").read_text())["n_selected"] == 1
    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    console = Console(file=strict, width=100)
    console.print(render(report))
    say(console, f"instance {row.instance_id}: {row.error}")
    strict.flush()
    assert f"agent said {FFFD}".encode() in strict.buffer.getvalue()  # type: ignore[attr-defined]


def test_writing_a_row_is_unchanged_without_surrogates(tmp_path: Path):
    """The usual bytes stay pydantic's own (the smoke set's files are compared byte for byte)."""
    from harness.results.model import ResultRow
    from harness.results.store import append_row

    row = ResultRow(instance_id="plain é 😀", status="ok", answer="ü")
    append_row(tmp_path / "output.jsonl", row)
    assert (tmp_path / "output.jsonl").read_text() == row.model_dump_json() + "\n"
