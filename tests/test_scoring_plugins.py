"""Scorers plugged in by module:attr, graded scorers' thresholds, and their place in the report."""

from __future__ import annotations

import json

import pytest

from harness.config import Scoring
from harness.errors import InputError
from harness.models.config import ModelSection
from harness.runner.scorers import build_scorers
from harness.scoring.apply import score_one
from harness.scoring.base import Score, ScoreContext
from harness.scoring.plugin import as_score
from tests.helpers.e2e import SUM, explain, harness, rows, run_replayed

CTX = ScoreContext(question="Sum column x of nums.csv.")


def test_return_values_become_scores():
    assert as_score("f", True, 0.7).correct is True and as_score("f", False, 0.7).value == 0.0
    graded = as_score("f", 0.6, 0.7)
    assert (graded.correct, graded.value) == (False, 0.6)
    assert as_score("f", 0.6, 0.5).correct is True
    assert as_score("f", {"correct": None, "value": 0.0, "explanation": "n/a"}, 0.7).correct is None
    assert as_score("f", Score(scorer="other", correct=True, value=1.0), 0.7).scorer == "f"


def test_plugins_load_by_module_attr_with_the_builtin_contract():
    grade, six, csv = build_scorers(Scoring(names=("tests.helpers.scorers:digits_share@0.5",
                                                   "tests.helpers.scorers:said_six",
                                                   "tests.helpers.scorers:QuestionMentionsCsv")))
    assert (grade.name, grade.threshold, six.name, csv.name) == ("digits_share", 0.5, "said_six", "mentions_csv")
    assert score_one(grade, "12", "123", CTX).correct is True  # 2/3 >= 0.5
    assert score_one(six, "6", "6", CTX).correct is True
    assert score_one(csv, "x", "6", CTX).correct is True


def test_a_plugin_that_returns_nonsense_costs_only_its_verdict():
    (bad,) = build_scorers(Scoring(names=("tests.helpers.scorers:broken",)))
    score = score_one(bad, "6", "6", CTX)
    assert score.correct is None and "scorer error" in score.explanation


@pytest.mark.parametrize("spec,message", [
    ("tests.helpers.scorers:nope", "cannot import"), ("tests.helpers.scorers:NOT_A_SCORER", "not a scorer"),
    ("gaia@0.5", "graded"), ("llm_judge@2", "[0, 1]"), ("no_such_scorer", "unknown scorer"),
])
def test_bad_scorer_specs_are_input_errors(spec, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[")):
        build_scorers(Scoring(names=(spec,), judge=ModelSection(name="x", kind="replay", path="r")))


def test_plugin_scorers_in_a_real_run_and_a_rescore(tmp_path):
    proc, out = run_replayed(tmp_path, SUM, "--scorer", "gaia", "--scorer", "tests.helpers.scorers:digits_share@0.9",
                             "--scorer", "tests.helpers.scorers:QuestionMentionsCsv")
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["scores"]["digits_share"]["value"] == 1.0 and row["scores"]["mentions_csv"]["correct"] is True
    report = json.loads((out / "report.json").read_text())
    assert report["scorers"]["digits_share"]["mean_score"] == 1.0
    assert "mean score" in proc.stdout
    again = harness("score", out, "--scorer", "tests.helpers.scorers:said_six")
    assert again.returncode == 0, explain(again)
    assert rows(out)[0]["scores"]["said_six"]["correct"] is True
    bad = harness("run", "--dataset", tmp_path / "data.jsonl", "--model", "rec", "--config", tmp_path / "config.toml",
                  "--output-dir", tmp_path / "bad", "--scorer", "tests.helpers.scorers:missing")
    assert bad.returncode == 2 and "--scorer tests.helpers.scorers:missing" in bad.stderr
