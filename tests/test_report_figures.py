"""One aggregation (harness/report/load.py): the HTML report, the viewer and report.json show the
same figures. A real run (real sandboxes, a replay model) of a dataset with three levels, two
epochs and four scorers (one of them raises), with an errored instance and one without a target;
then every figure the page draws in Chromium is checked against report.json's."""

from __future__ import annotations

import json
import urllib.request
from decimal import ROUND_HALF_UP, Decimal

import pytest

from harness.report import html as pages
from harness.report.build import build_report
from harness.report.view import ViewServer
from harness.results.store import read_rows
from tests.helpers.e2e import containers_of, explain, harness, out_dir
from tests.test_html_report import make_run_dir, open_report, report

SUM = "import pandas as pd; print(pd.read_csv('nums.csv').x.sum())"


def fixed(x: float, digits: int) -> str:
    """JavaScript's Number.toFixed (a tie rounds up), which the page formats with."""
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def pct(x: float) -> str:
    return fixed(100 * x, 1) + "%"


def ci(interval) -> str:
    return f" [{pct(interval[0])}, {pct(interval[1])}]"


def unjudged(k: int, unscored: int = 0) -> str:
    return (f", {k} not judged" if k else "") + (f", {unscored} unscored" if unscored else "")


def over_judged(b: dict) -> str:
    """A level's, an epoch's: accuracy (correct/judged, not judged, unscored) [interval]."""
    judged = b["n"] - b["no_verdict"] - b.get("unscored", 0)
    return (f"{pct(b['accuracy'])} ({b['correct']}/{judged}{unjudged(b['no_verdict'], b.get('unscored', 0))})"
            + ci(b["ci95"]))


def bars(pg, card: str) -> dict[str, str]:
    """A chart's bars as drawn: label -> the text beside the bar."""
    texts = pg.locator(f"{card} svg text").evaluate_all("ts => ts.map(t => t.textContent)")
    return dict(zip(texts[::2], texts[1::2], strict=True))


def replayed_dataset(folder):
    """Five instances on three levels; the replay answers per epoch (sum-b: wrong, then right),
    sum-d's recording ends without an answer (a model error), sum-e has no target (unscored)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nums.csv").write_text("x\n1\n2\n3\n")
    items = [("sum-a", "6", 1), ("sum-b", "7", 1), ("sum-c", "10", 2), ("sum-d", "6", 2), ("sum-e", None, 3)]
    (folder / "data.jsonl").write_text("".join(json.dumps(
        {"instance_id": iid, "question": "Sum column x of nums.csv.", "answer": answer, "files": ["nums.csv"],
         "level": level}) + "\n" for iid, answer, level in items))

    def turns(*answer):
        call = {"tool_calls": [{"name": "run_python", "arguments": {"code": SUM}}]}
        return [call, *({"content": f"<solution>{a}</solution>"} for a in answer)]

    replay = [{"instance_id": "sum-a", "turns": turns("6")}, {"instance_id": "sum-b", "epoch": 1, "turns": turns("6")},
              {"instance_id": "sum-b", "epoch": 2, "turns": turns("7")}, {"instance_id": "sum-c", "turns": turns("6")},
              {"instance_id": "sum-d", "turns": turns()}, {"instance_id": "sum-e", "turns": turns("6")}]
    (folder / "replay.jsonl").write_text("".join(json.dumps(x) + "\n" for x in replay))
    (folder / "config.toml").write_text(f'[llm.rec]\nkind = "replay"\npath = "{folder / "replay.jsonl"}"\n')
    return folder / "data.jsonl", folder / "config.toml"


@pytest.mark.docker
def test_every_figure_of_the_html_page_and_the_viewer_is_report_json_s(tmp_path, page):
    data, config = replayed_dataset(tmp_path / "data")
    out = out_dir(tmp_path, "fig")
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--epochs", 2, "--reducer", "mean", "--reducer", "majority", "--workers", 2, "--max-retries", 0,
                   "--scorer", "gaia", "--scorer", "exact", "--scorer", "tests.helpers.scorers:digits_share",
                   "--scorer", "tests.helpers.scorers:raises")
    assert proc.returncode == 3, explain(proc)  # an errored instance and missing verdicts
    assert not containers_of(out)
    rep = json.loads((out / "report.json").read_text())
    # the run is what it was made to be: every figure below is one worth checking
    assert set(rep["per_level"]) == {"1", "2", "3"} and rep["epochs"]["k"] == 2
    assert rep["errors_by_kind"] == {"model": 2} and rep["n_unscored"] == 1 and rep["ids"]["unscored"] == ["sum-e"]
    assert rep["scorers"]["raises"]["no_verdict"] == 6 and rep["epochs"]["reducers"]["majority"]["ties"] == ["sum-b"]
    assert 0 < rep["accuracy"] < 1 and rep["epochs"]["per_epoch"]["1"] != rep["epochs"]["per_epoch"]["2"]

    # the page's data: every key of report.json, the same value
    built = pages.build_data([out], with_traces=True)
    summary = built["runs"][0]["summary"]
    assert {k: summary[k] for k in rep} == rep
    # the viewer's: the same function
    with ViewServer([out], compare=False) as server:
        with urllib.request.urlopen(server.url + "api/data", timeout=30) as resp:
            live = json.loads(resp.read())["runs"][0]["summary"]
    assert {k: live[k] for k in rep} == rep

    # the page as Chromium draws it
    open_report(page, report([out], tmp_path / "figures.html"))
    assert not page.errors
    accuracy = bars(page, "#chart-accuracy")
    assert accuracy.pop("overall") == (f"{pct(rep['accuracy'])} ({rep['n_correct']}/{rep['n_judged']}"
                                       f"{unjudged(rep['n_no_verdict'], rep['n_unscored'])})" + ci(rep["ci95"]))
    assert accuracy == {f"level {k}": over_judged(b) for k, b in rep["per_level"].items()  # sum-e's level 3:
                        if b["n"] > b["no_verdict"] + b["unscored"]}  # unscored alone, no bar
    assert "1 of 5 unscored" in page.inner_text("#unscored")
    assert "Accuracy (gaia)" in page.inner_text("#chart-accuracy h3")  # the headline scorer's

    ep = rep["epochs"]
    epochs = bars(page, "#chart-epochs")
    assert {k: v for k, v in epochs.items() if k.startswith("epoch ")} == {
        f"epoch {k}": over_judged(b) for k, b in ep["per_epoch"].items()}
    for name, r in ep["reducers"].items():
        ties = f" ({len(r['ties'])} tie{'s' if len(r['ties']) > 1 else ''})" if r["ties"] else ""
        assert epochs[name] == pct(r["value"]) + ties + ci(r["ci95"])
    head = page.inner_text("#chart-epochs h3")
    assert f"{ep['k']} epochs" in head and f"headline: {ep['primary']}" in head
    assert f"agree {pct(ep['agreement'])} of pairs, all {pct(ep['all_agree'])} of instances" in head

    assert bars(page, "#chart-scorers") == {
        name: f"{pct(s['accuracy'])} ({s['correct']}/{s['n'] - s['no_verdict']}{unjudged(s['no_verdict'])}), "
              f"mean score {fixed(s['mean_score'], 2)}" + ci(s["ci95"])
        for name, s in rep["scorers"].items()}

    errors = bars(page, "#chart-errors")
    assert errors == {**{k: str(v) for k, v in rep["errors_by_kind"].items()},
                      **{f"scorer {k}": str(s["no_verdict"]) for k, s in rep["scorers"].items() if s["no_verdict"]}}
    card = page.inner_text("#no-verdict")
    for name, s in rep["scorers"].items():
        if s["no_verdict"]:
            assert f"{name}: no verdict: {s['no_verdict']} of {s['n']}; first: {s['first_error']}" in card

    units = rep["n_selected"] * ep["k"]
    limit = sum(rep["n_limit"].values())
    expected = {"ok": units - rep["n_errors"] - limit - rep["n_missing"], "limit": limit, "error": rep["n_errors"],
                "missing": rep["n_missing"]}
    assert bars(page, "#chart-outcomes") == {k: str(v) for k, v in expected.items() if v}
    assert page.inner_text("#progress").startswith(
        f"{rep['n_correct']}/{rep['n_judged']} correct, {rep['n_selected']} of {rep['n_selected']} finished, "
        f"{rep['n_unscored']} unscored: no target (not counted)")
    page.screenshot(path=str(tmp_path / "figures.png"), full_page=True)  # a test artifact


def test_the_page_places_an_instance_by_the_dataset_s_level_as_the_report_does(tmp_path):
    """selected.json (the dataset) says level 1 for every id, the rows say 1, 2, 3: the page's
    per-level figures are build_report's (the old page took the rows' level)."""
    run = make_run_dir(tmp_path / "r", 6)
    ids = json.loads((run / "selected.json").read_text())
    (run / "selected.json").write_text(json.dumps({iid: 1 for iid in ids}))
    (run / "report.json").unlink()  # a run killed before its report: the page builds it
    summary = pages.build_data([run], with_traces=False)["runs"][0]["summary"]
    expected = build_report(read_rows(run / "output.jsonl"), list(ids), leaked_containers=0,
                            levels=dict.fromkeys(ids, 1))
    assert list(summary["per_level"]) == ["1"]
    assert summary["per_level"] == json.loads(expected.model_dump_json())["per_level"]
