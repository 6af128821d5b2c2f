"""GAIA's Annotator Metadata as capability labels (tool family, steps bucket) in the report's
breakdowns, with intervals; the preflight's web warning; strict (gaia) vs lenient (llm_judge)
disagreements in report.json and the terminal. Figures computed by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rich.console import Console

from harness.benchmarks.gaia.capabilities import labels, steps_bucket, tool_families
from harness.datasets.model import Instance
from harness.report.breakdown import by_field, task_labels
from harness.report.build import build_report
from harness.report.output import render
from harness.report.stats import wilson_interval
from harness.results.model import ResultRow
from harness.runner.preflight import unreachable_web


@pytest.mark.parametrize("tools, families", [
    ("1. Web browser\n2. Search engine\n3. Calculator", ["web browsing"]),
    ("1. PDF viewer or Python (pypdf)\n2. Calculator", ["coding", "file types"]),
    ("1. Image recognition tools\n2. Video processing", ["multimodality"]),
    ("1. Calculator\n2. Critical path method", ["none"]),
    ("web browser\npython", ["coding", "web browsing"]),
])
def test_free_text_tools_map_to_families(tools, families):
    assert tool_families(tools) == families


def test_steps_buckets_and_labels_from_annotator_metadata():
    assert [steps_bucket(s) for s in ("1", "3", "4", "6", "7", "10", "11", "40", "x", "0", None)] == [
        "1-3", "1-3", "4-6", "4-6", "7-10", "7-10", "11+", "11+", None, None, None]
    meta = {"Annotator Metadata": {"Tools": "1. Web browser\n2. Python", "Number of steps": "5"}}
    assert labels(meta) == {"tool_family": ["coding", "web browsing"], "steps": "4-6"}
    assert task_labels(meta) == labels(meta)  # what tasks.json keeps for the report
    assert labels({"Annotator Metadata": "?"}) == {} and labels({}) == {}


def _row(iid, correct, scores=None, **kw):
    return ResultRow(instance_id=iid, status="ok", answer=kw.pop("answer", "a"), target="t", correct=correct,
                     scores=scores or {"gaia": {"correct": correct, "value": float(bool(correct))}}, **kw)


def test_breakdown_counts_an_instance_in_each_of_its_families_with_wilson_intervals():
    tasks = {"a": {"tool_family": ["coding", "web browsing"], "steps": "1-3"},
             "b": {"tool_family": ["coding"], "steps": "4-6"},
             "c": {"tool_family": ["web browsing"], "steps": "4-6"},
             "d": {"tool_family": ["coding"], "steps": "4-6"}}
    rows = [_row("a", True), _row("b", False), _row("c", True), _row("d", True)]
    report = build_report(rows, list(tasks), leaked_containers=0, tasks=tasks)
    family, steps = report.breakdowns["tool_family"], report.breakdowns["steps"]
    # coding: a, b, d -> 2 of 3; web browsing: a, c -> 2 of 2; steps 1-3: a (1/1); 4-6: b, c, d (2/3)
    assert (family["coding"]["n"], family["coding"]["correct"]) == (3, 2)
    assert family["coding"]["accuracy"] == pytest.approx(2 / 3)
    assert tuple(family["coding"]["ci95"]) == pytest.approx(wilson_interval(2, 3))
    assert (family["web browsing"]["n"], family["web browsing"]["correct"]) == (2, 2)
    assert (steps["1-3"]["correct"], steps["1-3"]["n"], steps["4-6"]["correct"], steps["4-6"]["n"]) == (1, 1, 2, 3)
    console = Console(record=True, width=300)
    console.print(render(report))
    text = console.export_text()
    assert "per tool family" in text and "coding 2/3 = 66.7% [" in text and "per annotated step count" in text


def test_breakdown_leaves_unjudged_rows_out_of_the_rate():
    rows = [{"instance_id": "a", "correct": True}, {"instance_id": "b", "correct": None}]
    groups = by_field(rows, "tool_family", {"a": {"tool_family": ["coding"]}, "b": {"tool_family": ["coding"]}})
    assert groups["coding"] == {"n": 2, "correct": 1, "no_verdict": 1, "accuracy": 1.0,
                                "ci95": list(wilson_interval(1, 1))}


def _cfg(network="none", website=None, search="none"):
    return SimpleNamespace(sandbox=SimpleNamespace(network=network, website=website),
                           search=SimpleNamespace(provider=search))


def test_preflight_warns_when_web_tasks_have_no_web(tmp_path):
    web = Instance(instance_id="w1", question="q", root=tmp_path,
                   metadata={"Annotator Metadata": {"Tools": "1. Web browser", "Number of steps": "2"}})
    offline = Instance(instance_id="f1", question="q", root=tmp_path,
                       metadata={"Annotator Metadata": {"Tools": "1. Python", "Number of steps": "2"}})
    warning = unreachable_web(_cfg(), [web, offline])
    assert warning is not None and "w1" in warning and "f1" not in warning and "--network none" in warning
    assert unreachable_web(_cfg(network="internet"), [web]) is None
    assert unreachable_web(_cfg(website=tmp_path), [web]) is None
    assert unreachable_web(_cfg(search="tavily"), [web]) is None
    assert unreachable_web(_cfg(), [offline]) is None


def _both(gaia, judge):
    return {"gaia": {"correct": gaia, "value": float(gaia), "explanation": "g"},
            "llm_judge": {"correct": judge, "value": float(judge), "explanation": "j"}}


def test_strict_and_lenient_disagreements_are_listed_both_ways():
    rows = [_row("fmt", False, _both(False, True), answer="$1,234"),  # right, badly formatted
            _row("lucky", True, _both(True, False)),
            _row("agree", True, _both(True, True)),
            _row("only-gaia", True),  # no judge verdict: not compared
            ResultRow(instance_id="err", status="error", error_kind="agent", scores=_both(False, True))]
    report = build_report(rows, ["fmt", "lucky", "agree", "only-gaia", "err"], leaked_containers=0)
    found = report.disagreements
    assert found is not None and found["compared"] == 3
    assert [d["instance_id"] for d in found["lenient_only"]] == ["fmt"]
    assert found["lenient_only"][0]["answer"] == "$1,234"
    assert [d["instance_id"] for d in found["strict_only"]] == ["lucky"]
    console = Console(record=True, width=300)
    console.print(render(report))
    assert "2 of 3 disagree: 1 right but badly formatted (judge only) (fmt), 1 the reverse (gaia only) (lucky)" \
        in console.export_text()
    assert build_report([_row("x", True)], ["x"], leaked_containers=0).disagreements is None
