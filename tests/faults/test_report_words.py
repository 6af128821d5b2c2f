"""Words of the end of a run and its pages (issue 29 item 19, the report and terminal parts): the TTY
bar labels its ETA, the HTML limits line hides unset values, no `.lock` file is left beside
runs/summary.csv. No Docker."""

from __future__ import annotations

import csv
import io
import json
import threading
import time
from pathlib import Path

from rich.console import Console

from harness.report import build_report
from harness.report.output import append_summary
from harness.results.model import ResultRow
from harness.runner.evaluate import _Bar


def test_the_tty_bar_labels_its_eta():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200)
    with _Bar(console, "instances", 4) as bar:
        bar.update(1, 1, 0, 1)
    assert "ETA" in out.getvalue()


def test_no_lock_file_is_left_beside_summary_csv_and_parallel_writers_keep_every_row(tmp_path, reliability):
    started = time.monotonic()
    report = build_report([ResultRow(instance_id="a", status="ok", correct=True, target="x", answer="x")], ["a"],
                          leaked_containers=0)
    runs = tmp_path / "runs"
    runs.mkdir()
    csv_path = runs / "summary.csv"

    def write(k: int) -> None:
        for j in range(5):
            append_summary(report, csv_path, run_label=f"r{k}-{j}", extra={}, output_dir=runs / f"r{k}-{j}")

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert sorted(p.name for p in runs.iterdir()) == ["summary.csv"]  # no summary.csv.lock
    assert len(list(csv.DictReader(csv_path.open()))) == 20
    reliability.record("4 writers of one runs/summary.csv, 5 rows each", "20 rows kept; no .lock file beside it",
                       started=started)


def test_the_html_limits_line_hides_unset_values(tmp_path, page):
    from typer.testing import CliRunner

    from harness.cli import app

    run = tmp_path / "run"
    run.mkdir()
    (run / "output.jsonl").write_text(ResultRow(instance_id="a", status="ok", correct=True).model_dump_json() + "\n")
    (run / "run.json").write_text(json.dumps({"dataset": "d", "model": "m", "scorers": ["gaia"],
                                              "limits": {"max_steps": 30, "max_tokens": None, "wall_time": None}}))
    out = tmp_path / "r.html"
    assert CliRunner().invoke(app, ["report", str(run), "--html", "--out", str(out)]).exit_code == 0
    page.goto(Path(out).as_uri())
    page.wait_for_selector("body[data-ready='1']")
    line = page.inner_text("#overview p")
    assert "limits max_steps=30" in line and "null" not in line and "max_tokens" not in line, line


def test_the_end_of_run_table_gives_the_first_agent_and_model_error(tmp_path, page):
    from rich.console import Console as Recorder
    from typer.testing import CliRunner

    from harness.cli import app
    from harness.report.output import render, write_report

    rows = [ResultRow(instance_id="a", status="error", error_kind="agent", error="Traceback (most recent call last)\n"
                      "  ...\nKeyError: 'x'"),
            ResultRow(instance_id="b", status="error", error_kind="model", error="model call failed: 502 Bad Gateway"),
            ResultRow(instance_id="c", status="error", error_kind="agent", error="second agent error"),
            ResultRow(instance_id="d", status="ok", correct=True, target="x", answer="x")]
    report = build_report(rows, ["a", "b", "c", "d"], leaked_containers=0)
    console = Recorder(width=200, record=True)
    console.print(render(report))
    text = console.export_text()
    assert "first agent error" in text and "a: Traceback (most recent call last)" in text
    assert "first model error" in text and "b: model call failed: 502 Bad Gateway" in text
    assert "second agent error" not in text
    run = tmp_path / "run"
    run.mkdir()
    (run / "output.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in rows))
    (run / "run.json").write_text(json.dumps({"dataset": "d", "model": "m", "scorers": ["gaia"]}))
    write_report(report, run)
    out = tmp_path / "r.html"
    assert CliRunner().invoke(app, ["report", str(run), "--html", "--out", str(out)]).exit_code == 0
    page.goto(Path(out).as_uri())
    page.wait_for_selector("body[data-ready='1']")
    card = page.inner_text("#chart-errors")
    assert "first model error: b: model call failed: 502 Bad Gateway" in card, card
