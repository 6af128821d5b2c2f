from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from rich.console import Console

from harness.report import append_summary, build_report, render, wilson_interval, write_report
from harness.results.model import ResultRow
from harness.usage import Usage


def row(iid: str, status: str = "ok", **kw) -> ResultRow:
    return ResultRow(instance_id=iid, status=status, **kw)


ROWS = [
    row("a", correct=True, level=1, answer_source="solution_tag", duration_s=10,
        usage=Usage(prompt_tokens=100, completion_tokens=10, llm_calls=2, cost=0.5)),
    row("b", correct=False, level=1, answer_source="final_message", duration_s=20),
    row("c", "error", error_kind="infra", level=2, duration_s=1,
        usage=Usage(prompt_tokens=5, completion_tokens=5, llm_calls=1, cost=0.1)),
    row("c", "error", error_kind="model", level=2, duration_s=2),  # latest for c
    row("d", "limit", limit="max_steps", correct=True, level=2, duration_s=30),
    row("zz", correct=True, level=1),  # not selected: ignored
]
SELECTED = ["a", "b", "c", "d", "e"]  # e has no row


def render_text(report) -> str:
    console = Console(width=120, record=True)
    console.print(render(report))
    return console.export_text()


def test_denominator_is_every_selected_id() -> None:
    r = build_report(ROWS, SELECTED, leaked_containers=0, wall_time_s=60)
    assert r.n_selected == 5 and r.n_correct == 2
    assert r.accuracy == pytest.approx(0.4)
    assert r.stderr == pytest.approx((0.4 * 0.6 / 5) ** 0.5)
    assert r.n_missing == 1 and r.n_errors == 1
    assert r.errors_by_kind == {"model": 1}
    assert r.n_limit == {"max_steps": 1}
    assert r.answer_sources == {"solution_tag": 1, "final_message": 1, "none": 1}
    assert r.tokens == {"prompt": 105, "completion": 15, "total": 120}  # every attempt counts
    assert r.cost == pytest.approx(0.6) and r.llm_calls == 3
    assert r.time_per_instance_s.median == 15  # latest rows: 10, 20, 2, 30
    assert r.time_per_instance_s.mean == pytest.approx(15.5)
    assert r.wall_time_s == 60 and r.clean


def test_per_level() -> None:
    r = build_report(ROWS, SELECTED, leaked_containers=0)
    assert list(r.per_level) == ["1", "2", "unknown"]
    assert (r.per_level["1"].n, r.per_level["1"].correct) == (2, 1)
    assert (r.per_level["2"].n, r.per_level["2"].correct) == (2, 1)
    assert (r.per_level["unknown"].n, r.per_level["unknown"].correct) == (1, 0)
    r = build_report(ROWS, SELECTED, leaked_containers=0, levels={"e": 3})
    assert r.per_level["3"].n == 1 and "unknown" not in r.per_level


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (1, 1), (50, 165)])
def test_wilson(k: int, n: int) -> None:
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert high - low > 0


def test_wilson_known_value() -> None:
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)


def test_write_report(tmp_path: Path) -> None:
    r = build_report(ROWS, SELECTED, leaked_containers=2)
    write_report(r, tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["n_selected"] == 5 and data["leaked_containers"] == 2
    assert "LEAKED" in render_text(r)


def test_summary_csv(tmp_path: Path) -> None:
    path = tmp_path / "summary.csv"
    r = build_report(ROWS, SELECTED, leaked_containers=0)
    append_summary(r, path, run_label="run1", extra={"model": "gpt-a"})
    append_summary(r, path, run_label="run2", extra={"model": "gpt-b"})
    text = path.read_text()
    assert text.count("run_label") == 1
    rows = list(csv.DictReader(path.open()))
    assert [x["run_label"] for x in rows] == ["run1", "run2"]
    assert rows[1]["model"] == "gpt-b" and float(rows[0]["accuracy"]) == 0.4
    # a new column (new extra key) widens the header, keeping older rows
    append_summary(r, path, run_label="run3", extra={"model": "gpt-c", "agent": "react"})
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 3 and rows[0]["agent"] == "" and rows[2]["agent"] == "react"
    assert path.read_text().count("run_label") == 1


def test_empty_input() -> None:
    r = build_report([], [], leaked_containers=0)
    assert r.n_selected == 0 and r.accuracy is None and r.ci95 == (0.0, 1.0)
    assert "Run report" in render_text(r)
    r = build_report([], ["a", "b"], leaked_containers=0)
    assert r.n_missing == 2 and r.accuracy == 0.0
    assert "0/2" in render_text(r)


def _scores(**verdicts) -> dict:
    return {name: {"scorer": name, "correct": ok, "value": 1.0 if ok else 0.0} for name, ok in verdicts.items()}


SCORED = [
    row("a", correct=True, scores=_scores(gaia=True, exact=True),
        env_outcomes={"code": {"ok": 2, "timeout": 1}, "web": {"error": 1}}),
    row("b", correct=False, scores=_scores(gaia=False, exact=None), env_outcomes={"code": {"ok": 1}}),
    row("c", "limit", limit="wall_time", correct=True, scores=_scores(gaia=True, exact=False)),
    row("d", "error", error_kind="agent", correct=False, env_outcomes={"code": {"crashed": 1}}),
]


def test_id_lists_per_outcome() -> None:
    r = build_report(ROWS, SELECTED, leaked_containers=0)
    assert r.ids == {"passed": ["a", "d"], "failed": ["b"], "no_verdict": [], "unscored": [], "errored": ["c"],
                     "limit": ["d"], "missing": ["e"]}
    r = build_report(SCORED, ["a", "b", "c", "d", "x"], leaked_containers=0)
    assert r.ids == {"passed": ["a", "c"], "failed": ["b"], "no_verdict": [], "unscored": [], "errored": ["d"],
                     "limit": ["c"], "missing": ["x"]}


def test_every_scorer_is_aggregated_over_every_selected_id() -> None:
    r = build_report(SCORED, ["a", "b", "c", "d", "x"], leaked_containers=0)
    assert list(r.scorers) == ["gaia", "exact"]
    gaia, exact = r.scorers["gaia"], r.scorers["exact"]
    assert (gaia.n, gaia.correct, gaia.accuracy, gaia.mean_score) == (5, 2, 0.4, 0.4)
    assert gaia.ci95 == wilson_interval(2, 5) == r.ci95
    # exact reached no verdict on b: its rates are over the 4 others (errored d and missing x count as not passed)
    assert (exact.correct, exact.no_verdict, exact.accuracy, exact.mean_score) == (1, 1, 0.25, 0.25)
    assert exact.ci95 == wilson_interval(1, 4) and exact.first_error == "no explanation given"
    assert "scorer exact" in render_text(r) and "scorer gaia" not in render_text(r)  # the headline is gaia


def test_env_outcomes_are_summed_from_the_latest_rows() -> None:
    rows_ = SCORED + [row("b", correct=True, env_outcomes={"file": {"ok": 3}})]  # b's retry wins
    r = build_report(rows_, ["a", "b", "c", "d"], leaked_containers=0)
    assert r.env_outcomes == {"code": {"crashed": 1, "ok": 2, "timeout": 1}, "file": {"ok": 3}, "web": {"error": 1}}
    assert r.env_outcomes_per_instance == {"a": SCORED[0].env_outcomes, "b": {"file": {"ok": 3}},
                                           "d": {"code": {"crashed": 1}}}
    assert "env actions" in render_text(r)


def test_summary_has_one_row_per_output_dir(tmp_path: Path) -> None:
    path = tmp_path / "summary.csv"
    first = build_report(ROWS, SELECTED, leaked_containers=0)
    append_summary(first, path, run_label="old", extra={})  # a row of an older harness: no output_dir
    append_summary(first, path, run_label="r1", extra={"model": "m"}, output_dir=tmp_path / "r1")
    append_summary(first, path, run_label="r2", extra={"model": "m"}, output_dir=tmp_path / "r2")
    better = build_report(SCORED, ["a", "b", "c"], leaked_containers=0)
    append_summary(better, path, run_label="r1", extra={"model": "m"}, output_dir=tmp_path / "r1")
    got = list(csv.DictReader(path.open()))
    assert [x["run_label"] for x in got] == ["old", "r2", "r1"]
    assert got[2]["output_dir"] == str((tmp_path / "r1").resolve()) and float(got[2]["accuracy"]) == 0.6667
    assert got[2]["accuracy_exact"] == "0.5" and got[1]["accuracy_exact"] == ""  # exact: b not judged


def test_model_call_messages_skip_texts_the_trace_holds(tmp_path: Path) -> None:
    from harness.models.meter import Meter
    from harness.traces import SystemPrompt, TaskEvent, ToolResult, Tracer, read_trace

    tracer = Tracer(tmp_path / "t.jsonl")
    meter = Meter(max_tokens=None, max_steps=None, tracer=tracer)
    tracer.emit(TaskEvent(task="the task"))
    tracer.emit(SystemPrompt(source="a", content="be brief"))
    first = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the task"},
             {"role": "user", "content": "orchestrator plan"}]
    meter.after_call({"content": "reply one", "usage": {}}, 0.1, "m", first)
    tracer.emit(ToolResult(name="run_python", call_id="c1", content="tool output"))
    second = first + [{"role": "assistant", "content": "reply one"},
                      {"role": "tool", "content": "tool output", "call_id": "c1"},
                      {"role": "user", "content": "new note"}]
    meter.after_call({"content": "reply two", "usage": {}}, 0.1, "m", second)
    tracer.close()
    calls = [e for e in read_trace(tmp_path / "t.jsonl") if e.type == "model_call"]
    assert [c.n_messages for c in calls] == [3, 6]
    assert [[m["content"] for m in c.messages] for c in calls] == [["orchestrator plan"], ["new note"]]


def test_autogen_messages_become_role_content_dicts() -> None:
    from autogen_core import FunctionCall
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        SystemMessage,
        UserMessage,
    )

    from harness.agents.autogen.models import trace_messages

    got = trace_messages([
        SystemMessage(content="sys"), UserMessage(content="task", source="user"),
        AssistantMessage(content=[FunctionCall(id="c1", name="run_python", arguments="{}")], source="assistant"),
        FunctionExecutionResultMessage(content=[FunctionExecutionResult(content="out", name="run_python",
                                                                        call_id="c1", is_error=False)]),
    ])
    assert got == [{"role": "system", "content": "sys"}, {"role": "user", "content": "task", "source": "user"},
                   {"role": "assistant", "content": None, "source": "assistant"},
                   {"role": "tool", "content": "out", "call_id": "c1"}]


def test_an_event_appended_after_a_torn_line_is_read(tmp_path: Path) -> None:
    from harness.traces import LimitEvent, append_event, read_trace

    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "task", "task": "x"}\n{"type": "mess')  # a killed writer's torn line
    append_event(path, LimitEvent(limit="wall_time", detail="killed at --instance-timeout 5 s"))
    assert [e.type for e in read_trace(path)] == ["task", "limit"]
