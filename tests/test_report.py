from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from rich.console import Console

from harness.report import append_summary, build_report, render, wilson_interval, write_report
from harness.results.model import ResultRow, Usage


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
    assert r.n_selected == 0 and r.accuracy == 0.0 and r.ci95 == (0.0, 1.0)
    assert "Run report" in render_text(r)
    r = build_report([], ["a", "b"], leaked_containers=0)
    assert r.n_missing == 2 and r.accuracy == 0.0
    assert "0/2" in render_text(r)
