"""End to end: the outputs that answer questions about a run (issue 10).

report.json's id lists, per-scorer aggregates and environment outcomes; the trace's `verdict`
(with the GAIA scorer's normalised strings) and `limit` (a wall-clock kill) events; a re-run of a
finished directory keeping its wall time and its one summary row; a rescore updating both.
Plain runner + replay model, so no key is needed; each run takes a few seconds.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.helpers.e2e import containers_of, explain, harness, out_dir, rows, trace

TARGET = "B9E1D5-YRANAC"
PRINT = {"name": "run_python", "arguments": {"code": "print(open('canary.txt').read().strip()[::-1].upper())"}}
SLEEP = {"name": "run_python", "arguments": {"code": "import time; time.sleep(60)"}}


def _answer(text: str) -> dict:
    return {"content": f"Done.\n<solution>{text}</solution>", "usage": {"prompt_tokens": 10, "completion_tokens": 2}}


def _call(call: dict) -> dict:
    return {"tool_calls": [call], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


def _dataset(folder: Path, turns: dict[str, list[dict]]) -> Path:
    """A jsonl dataset (one canary file, one target) with a replay.jsonl beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "canary.txt").write_text("canary-5d1e9b\n")
    with open(folder / "tasks.jsonl", "w") as fh:
        for iid in turns:
            fh.write(json.dumps({"instance_id": iid, "question": "Reverse canary.txt and upper-case it.",
                                 "answer": TARGET, "files": ["canary.txt"], "level": 1 if iid != "wrong" else 2})
                     + "\n")
    with open(folder / "replay.jsonl", "w") as fh:
        for iid, script in turns.items():
            fh.write(json.dumps({"instance_id": iid, "turns": script}) + "\n")
    return folder / "tasks.jsonl"


def _summary(out: Path) -> list[dict]:
    with open(out.parent / "summary.csv", newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["output_dir"] == str(out.resolve())]


def _by_id(out: Path) -> dict[str, dict]:
    return {r["instance_id"]: r for r in rows(out)}


@pytest.mark.docker
def test_report_trace_resume_and_rescore(tmp_path, image):
    data = _dataset(tmp_path / "data", {
        "pass": [_call(PRINT), _answer(TARGET)],
        "case": [_answer("b9e1d5-yranac ")],  # gaia: the same after normalising; exact: not
        "wrong": [_answer("nope")],
        "slow": [_call(SLEEP), _call(PRINT), _answer(TARGET)],  # one command timeout, one ok
    })
    out = out_dir(tmp_path)
    args = ["run", "--dataset", data, "--model", "replay", "--agent", "plain", "--output-dir", out,
            "--workers", 2, "--command-timeout", 2, "--scorer", "gaia", "--scorer", "exact"]
    proc = harness(*args)
    assert proc.returncode == 0, explain(proc)
    report = json.loads((out / "report.json").read_text())
    assert report["n_selected"] == 4 and report["n_correct"] == 3
    assert {k: sorted(v) for k, v in report["ids"].items()} == {
        "passed": ["case", "pass", "slow"], "failed": ["wrong"], "errored": [], "limit": [], "missing": [],
        "no_verdict": [], "unscored": []}
    gaia, exact = report["scorers"]["gaia"], report["scorers"]["exact"]
    assert list(report["scorers"]) == ["gaia", "exact"]
    assert (gaia["n"], gaia["correct"], gaia["mean_score"]) == (4, 3, 0.75)
    assert (exact["n"], exact["correct"], exact["mean_score"]) == (4, 2, 0.5)
    assert exact["ci95"][0] < 0.5 < exact["ci95"][1] and gaia["ci95"] == report["ci95"]
    assert report["per_level"]["2"]["correct"] == 0 and report["per_level"]["1"]["n"] == 3

    # Environment outcomes: per row from its trace, summed in the report.
    by_id = _by_id(out)
    assert by_id["slow"]["env_outcomes"] == {"code": {"timeout": 1, "ok": 1}}, by_id["slow"]
    assert by_id["pass"]["env_outcomes"] == {"code": {"ok": 1}} and by_id["case"]["env_outcomes"] == {}
    assert report["env_outcomes"] == {"code": {"ok": 2, "timeout": 1}}
    assert report["env_outcomes_per_instance"]["slow"] == {"code": {"timeout": 1, "ok": 1}}

    # The verdict closes each trace and shows what the GAIA scorer compared.
    events = trace(out, by_id["case"])
    verdict = events[-1]
    assert verdict["type"] == "verdict" and verdict["source"] == "run"
    assert (verdict["answer"], verdict["target"], verdict["correct"]) == ("b9e1d5-yranac", TARGET, True)
    assert verdict["scores"]["gaia"]["details"]["compared"] == ["b9e1d5yranac", "b9e1d5yranac"]
    assert "'b9e1d5yranac' vs 'b9e1d5yranac'" in verdict["scores"]["gaia"]["explanation"]
    assert verdict["scores"]["exact"]["correct"] is False
    assert [e["type"] for e in events].count("verdict") == 1
    # model_call carries the request's size; texts already in the trace are not repeated
    calls = [e for e in trace(out, by_id["slow"]) if e["type"] == "model_call"]
    assert [c["n_messages"] for c in calls] == [2, 4, 6]
    texts = [m["content"] for c in calls for m in c["messages"]]
    assert len(texts) == len(set(texts))

    wall = report["wall_time_s"]
    assert wall > 0 and len(_summary(out)) == 1
    run_ids = json.loads((out / "run.json").read_text())["run_ids"]
    assert len(run_ids) == 1 and run_ids[0].startswith(out.name[:12])

    # Re-running the finished directory: nothing to run, the wall time and the one summary row stay.
    again = harness(*args)
    assert again.returncode == 0, explain(again)
    report2 = json.loads((out / "report.json").read_text())
    assert report2["wall_time_s"] == wall and report2["ids"] == report["ids"]
    assert len(_summary(out)) == 1
    assert len(json.loads((out / "run.json").read_text())["run_ids"]) == 2

    # Rescore with exact first: the report, the directory's summary row and a new verdict follow.
    score = harness("score", out, "--scorer", "exact", "--scorer", "gaia")
    assert score.returncode == 0, explain(score)
    report3 = json.loads((out / "report.json").read_text())
    assert report3["n_correct"] == 2 and sorted(report3["ids"]["passed"]) == ["pass", "slow"]
    assert list(report3["scorers"]) == ["exact", "gaia"] and report3["wall_time_s"] == wall
    (summary,) = _summary(out)
    assert float(summary["accuracy"]) == 0.5 and float(summary["accuracy_gaia"]) == 0.75
    verdicts = [e for e in trace(out, _by_id(out)["case"]) if e["type"] == "verdict"]
    assert [v["source"] for v in verdicts] == ["run", "rescore"] and verdicts[-1]["correct"] is False
    assert containers_of(out) == []


@pytest.mark.docker
def test_a_wall_clock_kill_leaves_a_limit_event(tmp_path, image):
    data = _dataset(tmp_path / "data", {"hang": [_call(SLEEP), _answer(TARGET)]})
    out = out_dir(tmp_path)
    proc = harness("run", "--dataset", data, "--model", "replay", "--agent", "plain", "--output-dir", out,
                   "--instance-timeout", 5, "--command-timeout", 60)
    (row,) = rows(out)
    assert row["status"] == "limit" and row["limit"] == "wall_time", explain(proc)
    events = trace(out, row)
    limits = [e for e in events if e["type"] == "limit"]
    assert [(e["limit"], e["detail"]) for e in limits] == [("wall_time", "killed at --instance-timeout 5 s")]
    assert events[-1]["type"] == "verdict" and events[-1]["status"] == "limit" and events[-1]["correct"] is False
    assert events.index(limits[0]) == len(events) - 2
    report = json.loads((out / "report.json").read_text())
    assert report["ids"]["limit"] == ["hang"] and report["ids"]["failed"] == ["hang"]
    assert containers_of(out) == []
