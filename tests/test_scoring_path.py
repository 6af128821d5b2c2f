"""One scoring path: `harness score DIR` reaches exactly the verdicts `harness run` gave, and a
missing answer is never correct, whatever the scorer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.agents.contract import AgentResult, Limits
from harness.datasets.model import Instance
from harness.models.config import ModelSection
from harness.results.model import ResultRow
from harness.runner.instance import RunSettings, _finish
from harness.scoring import get_scorer
from harness.scoring.apply import context_for, score_row
from harness.scoring.base import ScoreContext
from harness.scoring.registry import scorers
from harness.usage import Usage
from tests.helpers.e2e import REPO, containers_of, explain, harness, rows

SMOKE = REPO / "datasets" / "gaia-smoke"
SCORER_FLAGS = ["--scorer", "gaia", "--scorer", "exact", "--scorer", "tool_calls:run_python", "--scorer", "budget"]
MAX_STEPS, MAX_TOKENS = 5, 2600
# Smoke instances replayed as recorded: correct within budget (1867 tokens), correct over the token
# budget (2901), a wrong answer (2989), an answer without <solution> tags (2697).
AS_RECORDED = {"cea369f5-6545-5e4f-9006-a6e7a6c3d3f5", "e7a68f6e-e9b7-5c61-bad7-21650684cc79",
               "964d85c4-677b-56b1-946d-d39b4af02e50", "5a79f795-8c1f-5451-9f49-e9fd38daa1f9"}
LIST = {"tool_calls": [{"name": "list_files", "arguments": {"path": "."}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5}}
CUSTOM = {
    # Answers "23" (right, no tags), gets the simulated user's reply, then loops until --max-steps stops it:
    # a `limit` row that still has an answer.
    "c4eea2af-0a09-5074-981e-18781a06799d": [{"content": "23", "usage": {"prompt_tokens": 100,
                                                                         "completion_tokens": 2}}] + [LIST] * 8,
    # Two expensive calls pass --max-tokens: a `limit` row without an answer.
    "d500fee3-f57f-5f9b-b9cd-4543389aaa9c": [
        {**LIST, "usage": {"prompt_tokens": 1900, "completion_tokens": 100}},
        {**LIST, "usage": {"prompt_tokens": 650, "completion_tokens": 50}},
        {"content": "<solution>9</solution>", "usage": {"prompt_tokens": 10, "completion_tokens": 5}}],
}


def replay_file(path: Path) -> Path:
    recorded = {}
    for line in (SMOKE / "replay.jsonl").read_text().splitlines():
        item = json.loads(line)
        if item["instance_id"] in AS_RECORDED:
            recorded[item["instance_id"]] = item["turns"]
    assert set(recorded) == AS_RECORDED
    recorded.update(CUSTOM)
    path.write_text("".join(json.dumps({"instance_id": i, "turns": t}) + "\n" for i, t in recorded.items()))
    return path


def comparable(row: dict) -> tuple:
    return row["instance_id"], row["status"], row["correct"], row["scores"]


@pytest.mark.docker
def test_harness_score_reproduces_harness_run(tmp_path, image, out):
    config = tmp_path / "replay.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay_file(tmp_path / "turns.jsonl")}"\n')
    ids = sorted(AS_RECORDED | set(CUSTOM))
    proc = harness("run", "--dataset", SMOKE, "--model", "rec", "--config", config, "--output-dir", out,
                   "--ids", ",".join(ids), "--workers", 2, "--max-steps", MAX_STEPS, "--max-tokens", MAX_TOKENS,
                   *SCORER_FLAGS)
    assert proc.returncode == 0, explain(proc)
    ran = {r["instance_id"]: r for r in rows(out)}
    assert sorted(ran) == ids
    assert containers_of(out) == []

    # The run covers what a rescore must reproduce: limits hit (with and without an answer), budget
    # verdicts both ways, answers from tags and from the final message, right and wrong.
    stepped, spent = ran["c4eea2af-0a09-5074-981e-18781a06799d"], ran["d500fee3-f57f-5f9b-b9cd-4543389aaa9c"]
    assert stepped["status"] == "limit" and stepped["limit"] == "max_steps" and stepped["steps"] == MAX_STEPS
    assert stepped["answer"] == "23" and stepped["answer_source"] == "final_message" and stepped["user_replies"] == 1
    assert stepped["correct"] is True and stepped["scores"]["budget"]["explanation"] == "within budget"
    assert spent["status"] == "limit" and spent["limit"] == "max_tokens" and spent["answer"] is None
    assert spent["correct"] is False
    assert {s["explanation"] for s in spent["scores"].values()} == {"no answer: the agent gave no final message"}
    over = ran["e7a68f6e-e9b7-5c61-bad7-21650684cc79"]
    assert over["correct"] is True and over["scores"]["budget"]["correct"] is False
    assert over["scores"]["budget"]["explanation"] == f"over budget: tokens 2901 > {MAX_TOKENS}"
    within = ran["cea369f5-6545-5e4f-9006-a6e7a6c3d3f5"]
    assert all(s["correct"] for s in within["scores"].values()), within["scores"]
    assert within["scores"]["budget"]["details"] == {"over": [], "unchecked": []}
    assert ran["5a79f795-8c1f-5451-9f49-e9fd38daa1f9"]["answer_source"] == "final_message"
    assert ran["964d85c4-677b-56b1-946d-d39b4af02e50"]["correct"] is False
    assert {r["status"] for r in ran.values()} == {"ok", "limit"}
    report = json.loads((out / "report.json").read_text())

    # Rescore with the same scorers: every verdict and explanation as in the run.
    output = out / "output.jsonl"
    output.write_text("".join(json.dumps({**r, "scores": {}, "correct": None}) + "\n" for r in ran.values()))
    proc = harness("score", out, *SCORER_FLAGS)
    assert proc.returncode == 0, explain(proc)
    rescored = {r["instance_id"]: r for r in rows(out)}
    for iid, row in ran.items():
        assert comparable(rescored[iid]) == comparable(row), iid
        assert rescored[iid] == row  # nothing else about the row changed either
    again = json.loads((out / "report.json").read_text())
    assert again["n_correct"] == report["n_correct"] and again["n_selected"] == report["n_selected"]

    # The first scorer decides `correct`; scoring back with the run's scorers restores the run's rows.
    proc = harness("score", out, "--scorer", "budget", "--scorer", "gaia")
    assert proc.returncode == 0, explain(proc)
    assert rows(out) != list(ran.values())
    assert {r["instance_id"]: r["correct"] for r in rows(out)} == {
        iid: r["scores"]["budget"]["correct"] for iid, r in ran.items()}
    proc = harness("score", out, *SCORER_FLAGS)
    assert proc.returncode == 0, explain(proc)
    assert {r["instance_id"]: r for r in rows(out)} == ran


# ------------------------------------------------------------------ a missing answer is never correct
def every_scorer():
    """Each built-in scorer of answers, set up so that it would pass anything it is asked about (gaia2's judges the
    run's actions, not its answer: tests/test_gaia2_run.py; harbor's, the task's verifier: tests/test_harbor.py)."""
    for name in sorted(scorers()):
        if name in ("gaia2", "harbor"):
            continue
        if name == "tool_calls":
            yield get_scorer(name, expected=["run_python"])
        elif name == "llm_judge":
            yield get_scorer(name, complete=lambda prompt: "VERDICT: CORRECT")
        else:
            yield get_scorer(name)


GENEROUS = ScoreContext(tool_calls=["run_python"], total_tokens=10, max_tokens=1000, steps=1, max_steps=10,
                        question="What is nothing?")


@pytest.mark.parametrize("scorer", list(every_scorer()), ids=lambda s: s.name)
def test_a_missing_answer_is_never_correct(scorer):
    assert set(scorers()) == {"gaia", "gaia2", "harbor", "exact", "tool_calls", "budget", "llm_judge", "math",
                            "multihoprag"}  # covered here, gaia2 and harbor by their own tests
    scores, correct = score_row(None, "None", [scorer], GENEROUS)
    assert correct is False, scores
    assert scores[scorer.name]["correct"] is False and scores[scorer.name]["value"] == 0.0
    assert "no answer" in scores[scorer.name]["explanation"]


def test_the_guard_matters_scorers_alone_would_pass_a_missing_answer():
    """Why score_row checks: asked directly, these scorers accept None (GAIA compares the string "None")."""
    direct = {s.name: s.score(None, "None", context=GENEROUS).correct for s in every_scorer()}
    assert direct["gaia"] is True and direct["tool_calls"] is True and direct["budget"] is True


def test_a_run_row_without_a_final_message_is_not_correct():
    """`harness run`'s own path (_finish): an empty final message is no answer, even against target "None"."""
    instance = Instance(instance_id="nothing", question="q", answer="None", root=Path("."))
    settings = RunSettings(run_id="r", image="i", agent="plain", model=ModelSection(name="m", model="m"),
                           limits=Limits(max_steps=3), output_dir=Path("."), provider=None,
                           scorers=list(every_scorer()))
    for final in ("", "   \n"):
        row = _finish(instance, settings, AgentResult(final_message=final, limit="max_steps",
                                                      usage=Usage(llm_calls=3)), 1, "", 0.0, None, None, [])
        assert row.status == "limit" and row.answer is None and row.answer_source == "none"
        assert row.correct is False and not any(s["correct"] for s in row.scores.values()), row.scores


def test_no_target_means_no_verdict_and_a_failing_scorer_costs_only_its_own():
    assert score_row("42", None, [get_scorer("gaia")], GENEROUS) == ({}, None)

    class Broken:
        name = "broken"

        def score(self, answer, target, *, context):
            raise RuntimeError("scorer bug")

    scores, correct = score_row("42", "42", [Broken(), get_scorer("gaia")], GENEROUS)
    assert correct is None and "scorer error: RuntimeError: scorer bug" in scores["broken"]["explanation"]
    assert scores["gaia"]["correct"] is True


def test_the_run_and_rescore_contexts_agree():
    """The one context builder gets the limits both ways; the budget scorer reads them."""
    row = ResultRow(instance_id="x", status="ok", answer="1", target="1", steps=4,
                    usage=Usage(prompt_tokens=90, completion_tokens=20, llm_calls=4), tool_calls=["run_shell"])
    context = context_for(tool_calls=row.tool_calls, total_tokens=row.usage.total_tokens, steps=row.steps,
                          limits=Limits(max_tokens=100, max_steps=4), question="q")
    scores, correct = score_row(row.answer, row.target, [get_scorer("budget")], context)
    assert correct is False and scores["budget"]["explanation"] == "over budget: tokens 110 > 100"
