"""A cost is "not priced" everywhere when the model's section gives no prices (issue 29 item 19): the live
progress said "cost not priced", but the end-of-run table said `$0.0000 / 4`, the HTML report `Cost: $0.0000`,
summary.csv and the exports `0.0`, and neither run.json nor report.json could tell a section priced at 0
from one with no prices at all.

Two real runs (the plain runner against the scripted OpenAI-compatible server the test starts): one whose
section sets no price_*_per_1k, one priced at 0 (a free local model, said so): the first is "not priced" in
the table, `harness report` (rebuilt from run.json), report.json, run.json, summary.csv, the HTML report and
the jsonl and Inspect exports (null);
the second is $0.0000 in each.
"""

from __future__ import annotations

import csv
import json
import re
import time

import pytest

from harness import exit_codes
from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers.e2e import containers_of, explain, fake_config, harness, out_dir, remove_leftovers, tasks_file

NOT_PRICED = "not priced (no price_*_per_1k)"


def _run(tmp_path, prices: tuple[float, float] | None):
    out = out_dir(tmp_path)
    data = tasks_file(tmp_path, [f"cost-{out.name}-{n}" for n in range(2)])
    with FakeOpenAI([], default=text("<solution>42</solution>", usage=(1000, 100))) as server:
        config = fake_config(tmp_path / f"models-{out.name}.toml", server.base_url, prices=prices)
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", "plain", timeout=240)
    assert proc.returncode == exit_codes.OK, explain(proc)
    return proc, out


def _shown(out, page, tmp_path) -> tuple[str, str, str]:
    """`harness report` of the directory (report.json removed: built again from the rows and run.json), and
    the HTML report's cost card and first row's cost cell."""
    (out / "report.json").unlink()
    again = harness("report", out, timeout=120)
    assert again.returncode == exit_codes.OK, explain(again)
    html = tmp_path / f"{out.name}.html"
    made = harness("report", out, "--html", "--out", html, timeout=120)
    assert made.returncode == exit_codes.OK, explain(made)
    page.goto(html.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    card = page.inner_text("#costs h3")
    cell = page.inner_text("#rows tbody tr:first-child td:nth-last-child(3)")
    return again.stdout, card, cell


def _exported(out, tmp_path) -> tuple[list, object]:
    """The jsonl export's cost column and the Inspect log's total cost (read back with inspect_ai's reader)."""
    from inspect_ai.log import read_eval_log

    lines, log = tmp_path / f"{out.name}.jsonl", tmp_path / f"{out.name}.json"
    for fmt, path in (("jsonl", lines), ("inspect", log)):
        made = harness("export", out, "--format", fmt, "--out", path, timeout=120)
        assert made.returncode == exit_codes.OK, explain(made)
    costs = [json.loads(line)["cost"] for line in lines.read_text().splitlines()]
    return costs, next(iter(read_eval_log(str(log)).stats.model_usage.values())).total_cost


def _cost_row(proc) -> str:
    found = re.search(r"cost / llm calls\s*│\s*(.*?)\s*│", proc.stdout)
    assert found, proc.stdout
    return found.group(1)


@pytest.mark.docker
def test_an_unpriced_model_is_not_priced_everywhere_and_a_free_one_is_zero(tmp_path, image, page, reliability):
    t0 = time.monotonic()
    unpriced, out = _run(tmp_path, None)
    free, out0 = _run(tmp_path, (0.0, 0.0))
    try:
        report, report0 = (json.loads((o / "report.json").read_text()) for o in (out, out0))
        run, run0 = (json.loads((o / "run.json").read_text()) for o in (out, out0))
        summary = {row["output_dir"]: row for row in csv.DictReader((tmp_path / "summary.csv").open())}
        shown, card, cell = _shown(out, page, tmp_path)
        shown0, card0, cell0 = _shown(out0, page, tmp_path)
        reliability.record("the cost of a model section without prices, everywhere it is shown",
                           f"table {_cost_row(unpriced)!r}, page {card!r}, summary.csv "
                           f"{summary[str(out)]['cost']!r}; priced at 0: {_cost_row(free)!r}", lost=0,
                           leaked=len(containers_of(out)) + len(containers_of(out0)), started=t0)
        assert _cost_row(unpriced) == f"{NOT_PRICED} / 2" and "$0.0000" not in _cost_row(unpriced)
        assert report["priced"] is False and run["prices"] == "unset", (report.get("priced"), run.get("prices"))
        assert report["cost"] is None and report0["cost"] == 0.0, (report["cost"], report0["cost"])  # before: 0.0
        assert summary[str(out)]["cost"] == ""
        assert f"{NOT_PRICED} / 2" in shown and "$0.0000" not in shown  # rebuilt from output.jsonl and run.json
        assert card == f"Cost: {NOT_PRICED}" and cell == "not priced", (card, cell)
        assert _exported(out, tmp_path) == ([None, None], None)  # the exports: no cost either

        assert _cost_row(free) == "$0.0000 / 2"  # priced at 0: a figure, said as one
        assert report0["priced"] is True and "prices" not in run0
        assert float(summary[str(out0)]["cost"]) == 0.0
        assert "$0.0000 / 2" in shown0 and card0.startswith("Cost: $0.0000") and cell0 == "0.0000", (card0, cell0)
        assert _exported(out0, tmp_path) == ([0.0, 0.0], 0.0)
    finally:
        assert remove_leftovers(out) == [] and remove_leftovers(out0) == []
