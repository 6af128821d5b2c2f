"""A figure over nothing judged is no figure: null in report.json and the summary CSV, "not judged"
in the terminal and on the page, never 0.0% (issue 29 item 15: a GAIA test split said
"accuracy": 0.0 and `coding 0/0 = 0.0%`, and the page drew 0/0 as a 0% bar). No Docker."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console

from harness.report import build_report
from harness.report.output import render, summary_row, write_report
from harness.results.model import ResultRow
from harness.results.store import append_row

IDS = ("t-1", "t-2", "t-3")
TASKS = {iid: {"tool_family": ["coding"], "unscored": "the target is a placeholder"} for iid in IDS}


def unscored_rows() -> list[ResultRow]:
    return [ResultRow(instance_id=iid, status="ok", answer="42", target="?", level=1 + k, correct=None,
                      unscored="the target is a placeholder ('?': the answers are private)")
            for k, iid in enumerate(IDS)]


def no_verdict_rows() -> list[ResultRow]:  # a scorer that reached no verdict on any
    return [ResultRow(instance_id=iid, status="ok", answer="42", target="7", level=1, correct=None,
                      scores={"gaia": {"scorer": "gaia", "correct": None, "value": 0.0, "explanation": "it raised"}})
            for iid in IDS]


def text_of(report) -> str:
    console = Console(width=300, record=True)
    console.print(render(report))
    return console.export_text()


def test_nothing_judged_is_null_and_not_judged_everywhere(tmp_path, reliability):
    started = time.monotonic()
    report = build_report(unscored_rows(), list(IDS), leaked_containers=0, levels={"t-1": 1, "t-2": 2, "t-3": 3},
                          tasks=TASKS)
    dumped = json.loads(report.model_dump_json())
    assert dumped["accuracy"] is None and dumped["stderr"] is None
    assert all(b["accuracy"] is None for b in dumped["per_level"].values())
    assert dumped["breakdowns"]["tool_family"]["coding"]["accuracy"] is None
    text = text_of(report)
    assert "%" not in text.split("tokens", 1)[0], text  # no rate of any kind above the usage lines
    assert "coding not judged" in text, text
    row = summary_row(report, run_label="x", extra={})
    assert row["accuracy"] is None and row["accuracy_level_1"] is None

    scorer = build_report(no_verdict_rows(), list(IDS), leaked_containers=0, epochs=1)
    dumped = json.loads(scorer.model_dump_json())
    assert dumped["accuracy"] is None and dumped["scorers"]["gaia"]["accuracy"] is None
    assert dumped["scorers"]["gaia"]["mean_score"] is None
    assert "%" not in text_of(scorer).split("tokens", 1)[0]
    reliability.record("report of a run with nothing judged (a GAIA test split; a scorer with no verdict)",
                       "accuracy null in report.json and CSV; 'not judged' in the terminal, no 0.0%",
                       started=started)


def test_epochs_with_nothing_judged_are_null(tmp_path):
    rows = [r.model_copy(update={"epoch": e}) for r in no_verdict_rows() for e in (1, 2)]
    report = build_report(rows, list(IDS), leaked_containers=0, epochs=2, reducers=["mean"])
    dumped = json.loads(report.model_dump_json())
    assert dumped["accuracy"] is None
    assert dumped["epochs"]["reducers"]["mean"]["value"] is None
    assert all(b["accuracy"] is None for b in dumped["epochs"]["per_epoch"].values())
    assert "%" not in text_of(report).split("reducer mean ", 1)[1].split("tokens", 1)[0]


def test_the_page_says_not_judged_never_a_0_percent_bar(tmp_path, page):
    from typer.testing import CliRunner

    from harness.cli import app

    run = tmp_path / "test-split"
    run.mkdir()
    for row in unscored_rows():
        append_row(run / "output.jsonl", row)
    (run / "selected.json").write_text(json.dumps({"t-1": 1, "t-2": 2, "t-3": 3}))
    (run / "tasks.json").write_text(json.dumps(TASKS))
    (run / "run.json").write_text(json.dumps({"dataset": "gaia-test", "model": "m", "scorers": ["gaia"]}))
    write_report(build_report(unscored_rows(), list(IDS), leaked_containers=0, levels={"t-1": 1, "t-2": 2, "t-3": 3},
                              tasks=TASKS), run)
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(run), "--html", "--out", str(out)])
    assert result.exit_code == 0, result.output
    page.goto(Path(out).as_uri())
    page.wait_for_selector("body[data-ready='1']")
    assert not page.errors, page.errors
    card = page.inner_text(".breakdown[data-field='tool_family']")
    assert "coding" in card and "not judged" in card and "%" not in card.split("CI", 1)[1], card
    overview = page.inner_text("#overview")
    assert "0.0%" not in overview, overview


def test_the_inspect_export_of_a_scorer_with_nothing_judged_reads_back(tmp_path):
    from inspect_ai.log import read_eval_log
    from typer.testing import CliRunner

    from harness.cli import app

    run = tmp_path / "no-verdict"
    run.mkdir()
    for row in no_verdict_rows():
        append_row(run / "output.jsonl", row)
    (run / "selected.json").write_text(json.dumps(dict.fromkeys(IDS, 1)))
    (run / "run.json").write_text(json.dumps({"dataset": "d", "model": "m", "scorers": ["gaia"]}))
    out = tmp_path / "log.json"
    result = CliRunner().invoke(app, ["export", str(run), "--format", "inspect", "--out", str(out)])
    assert result.exit_code == 0, result.output
    score = read_eval_log(str(out)).results.scores[0]
    assert score.scored_samples == 0 and "accuracy" not in score.metrics  # not a 0.0
