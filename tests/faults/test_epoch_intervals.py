"""With --epochs K, a per-scorer 95% interval is clustered by instance as the headline's is (issue 29
item 16: 38 of 42 epoch rows gave [77.9%, 96.2%], Wilson over 42 rows as if independent, beside the
headline's [71.1%, 97.3%] over 14 instances; the Inspect export carried the narrow one). The HTML
table shows each row's epoch. No Docker."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness.report import build_report
from harness.report.output import write_report
from harness.report.stats import wilson_interval
from harness.results.model import ResultRow
from harness.results.store import append_row

IDS = [f"q-{i:02d}" for i in range(14)]
FAILS = {("q-00", 1), ("q-00", 2), ("q-01", 3), ("q-02", 2)}  # 38 of 42 epoch rows pass


def epoch_rows() -> list[ResultRow]:
    rows = []
    for iid in IDS:
        for epoch in (1, 2, 3):
            ok = (iid, epoch) not in FAILS
            rows.append(ResultRow(instance_id=iid, epoch=epoch, status="ok", answer="a" if ok else "b", target="a",
                                  level=1, correct=ok, scores={"gaia": {"scorer": "gaia", "correct": ok,
                                                                        "value": float(ok), "explanation": ""}}))
    return rows


def test_a_scorer_s_interval_over_epochs_is_the_headline_s(reliability):
    started = time.monotonic()
    report = build_report(epoch_rows(), IDS, leaked_containers=0, epochs=3, reducers=["mean"])
    gaia = report.scorers["gaia"]
    assert (gaia.correct, gaia.n) == (38, 42)
    assert gaia.ci95 == pytest.approx(report.ci95)  # the headline: the mean reducer over 14 instances
    assert gaia.ci95 != pytest.approx(wilson_interval(38, 42))  # what 42 independent rows would say
    reliability.record("--epochs 3: a scorer's 95% interval over 38/42 epoch rows of 14 instances",
                       f"[{gaia.ci95[0]:.1%}, {gaia.ci95[1]:.1%}], clustered by instance, the headline's "
                       f"[{report.ci95[0]:.1%}, {report.ci95[1]:.1%}]", started=started)


def test_the_inspect_export_carries_the_clustered_interval(tmp_path):
    from inspect_ai.log import read_eval_log
    from typer.testing import CliRunner

    from harness.cli import app

    run = epoch_run(tmp_path)
    out = tmp_path / "log.json"
    result = CliRunner().invoke(app, ["export", str(run), "--format", "inspect", "--out", str(out)])
    assert result.exit_code == 0, result.output
    metrics = read_eval_log(str(out)).results.scores[0].metrics
    report = build_report(epoch_rows(), IDS, leaked_containers=0, epochs=3, reducers=["mean"])
    assert (metrics["ci95_low"].value, metrics["ci95_high"].value) == pytest.approx(report.ci95)


def epoch_run(tmp_path: Path) -> Path:
    run = tmp_path / "epochs"
    run.mkdir()
    for row in epoch_rows():
        append_row(run / "output.jsonl", row)
    (run / "selected.json").write_text(json.dumps(dict.fromkeys(IDS, 1)))
    (run / "run.json").write_text(json.dumps({"dataset": "d", "model": "m", "scorers": ["gaia"], "epochs": 3,
                                              "reducers": ["mean"]}))
    write_report(build_report(epoch_rows(), IDS, leaked_containers=0, epochs=3, reducers=["mean"]), run)
    return run


def test_the_html_table_shows_each_row_s_epoch(tmp_path, page):
    from typer.testing import CliRunner

    from harness.cli import app

    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(epoch_run(tmp_path)), "--html", "--out", str(out)])
    assert result.exit_code == 0, result.output
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    heads = page.locator("#rows thead th").all_inner_texts()
    assert "epoch" in heads
    col = heads.index("epoch")
    cells = page.locator("#rows tbody tr").evaluate_all(f"rs => rs.map(r => r.cells[{col}].innerText)")
    assert sorted(cells) == sorted(["1", "2", "3"] * 14)
    page.click("#rows th:has-text('epoch')")  # sorts like any column
    assert page.locator("#rows tbody tr").first.locator("td").nth(col).inner_text() == "1"
    assert not page.errors


def test_a_breakdown_s_interval_over_epochs_is_clustered_by_instance():
    tasks = {iid: {"tool_family": ["coding"]} for iid in IDS}
    report = build_report(epoch_rows(), IDS, leaked_containers=0, epochs=3, reducers=["mean"], tasks=tasks)
    coding = report.breakdowns["tool_family"]["coding"]
    assert (coding["correct"], coding["n"]) == (38, 42)
    assert coding["ci95"] == pytest.approx(list(report.ci95))  # every instance is in the group
