"""harness/report/breakdown.py (accuracy per field, retrieval recall) and the multihoprag scorer."""

from __future__ import annotations

import pytest

from harness.benchmarks.multihoprag.scorer import MultiHopRagScorer
from harness.report.breakdown import by_field, doc_key, evidence_recall, retrieval_recall, searched_docs
from harness.report.stats import wilson_interval
from harness.scoring.base import ScoreContext
from harness.traces import EnvAction

META = {
    "a": {"question_type": "inference_query",
          "evidence": [{"title": "A1", "url": "u/a1"}, {"title": "A2", "url": "u/a2"},
                       {"title": "A1 again", "url": "u/a1"}]},
    "b": {"question_type": "comparison_query",
          "evidence": [{"title": "B One", "url": ""}, {"title": "B2", "url": "u/b2"}]},
    "c": {"question_type": "null_query", "evidence": []},
}


def search(*hits: dict, env: str = "search") -> dict:
    return {"type": "env", "env": env, "action": "search_corpus", "results": list(hits)}


def test_by_field_groups_rows_by_row_field_then_metadata():
    rows = [{"instance_id": "a", "correct": True}, {"instance_id": "a", "epoch": 2, "correct": False},
            {"instance_id": "b", "correct": None}, {"instance_id": "c", "correct": True},
            {"instance_id": "zz", "correct": True}]
    groups = by_field(rows, "question_type", META)
    assert list(groups) == ["comparison_query", "inference_query", "null_query", "unknown"]
    # two epochs of one instance: one cluster, not two independent rows (issue 29 item 16)
    assert groups["inference_query"] == {"n": 2, "correct": 1, "no_verdict": 0, "accuracy": 0.5,
                                         "ci95": [0.0, 1.0]}
    assert groups["comparison_query"] == {"n": 1, "correct": 0, "no_verdict": 1, "accuracy": None,
                                          "ci95": list(wilson_interval(0, 0))}
    assert groups["unknown"]["correct"] == 1
    by_level = by_field([{"instance_id": "a", "level": 2, "correct": True}, {"instance_id": "b", "level": 2,
                                                                            "correct": True}], "level")
    assert by_level == {"2": {"n": 2, "correct": 2, "no_verdict": 0, "accuracy": 1.0,
                              "ci95": list(wilson_interval(2, 2))}}
    assert by_field([], "level") == {}


def test_doc_identity_is_the_url_else_the_title():
    assert doc_key({"title": "T", "url": "u"}) == "url:u"
    assert doc_key({"title": " The Title ", "url": ""}) == "title:the title"
    assert doc_key({"title": "", "url": None}) is None


def test_evidence_recall_counts_distinct_documents_any_search_returned():
    events = [search({"title": "A1", "url": "u/a1"}), {"type": "env", "env": "code", "action": "run_python"},
              search({"title": "Other", "url": "u/x"})]
    assert evidence_recall(META["a"]["evidence"], events) == 0.5  # u/a1 counted once, u/a2 missed
    assert evidence_recall(META["a"]["evidence"], events + [search({"title": "A2", "url": "u/a2"})]) == 1.0
    assert evidence_recall(META["a"]["evidence"], [search({"title": "A2", "url": "u/a2"}, env="file")]) == 0.0
    assert evidence_recall([], events) is None
    # an evidence item without a url is found by its title (case and spaces aside)
    assert evidence_recall(META["b"]["evidence"], [search({"title": "b one ", "url": "elsewhere"})]) == 0.5


def test_searched_docs_reads_trace_event_objects_too():
    event = EnvAction(env="search", action="search_corpus", results=[{"title": "A2", "url": "u/a2", "score": 1.0}])
    assert searched_docs([event]) == {"url:u/a2", "title:a2"}


def test_retrieval_recall_over_rows_skips_rows_without_evidence():
    rows = [{"instance_id": "a", "correct": True}, {"instance_id": "b", "correct": False},
            {"instance_id": "c", "correct": True}]
    traces = [[search({"title": "A1", "url": "u/a1"}), search({"title": "A2", "url": "u/a2"})],
              [search({"title": "B2", "url": "u/b2"})], [search({"title": "A1", "url": "u/a1"})]]
    result = retrieval_recall(rows, traces, META)
    assert result["n"] == 2 and result["mean"] == pytest.approx(0.75)
    assert result["per_row"] == [{"instance_id": "a", "epoch": 1, "recall": 1.0},
                                 {"instance_id": "b", "epoch": 1, "recall": 0.5}]
    assert result["by_question_type"] == {"comparison_query": 0.5, "inference_query": 1.0}
    assert retrieval_recall([rows[2]], [[]], META) == {"n": 0, "mean": None, "per_row": [], "by_question_type": {}}
    with pytest.raises(ValueError, match="one trace per row"):
        retrieval_recall(rows, traces[:2], META)


@pytest.mark.parametrize(("answer", "target", "verdict"), [
    ("Yes", "Yes", True), ("yes", "Yes", True), ("No", "Yes", False), ("yes.", "Yes", False),
    ("Sam Bankman-Fried", "Sam Bankman-Fried", True), ("Bankman-Fried", "Sam Bankman-Fried", True),
    ("Not enough information.", "Insufficient information.", True),
    ("Not enough information", "Insufficient information.", False),
    ('The answer to the question is "No" because yes', "Yes", False),  # the official extraction first
    ("", "Yes", False),
])
def test_multihoprag_scorer_is_the_official_word_overlap(answer, target, verdict):
    score = MultiHopRagScorer().score(answer, target, context=ScoreContext())
    assert score.correct is verdict, score.explanation
