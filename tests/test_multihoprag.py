"""MultiHop-RAG end to end: the sample set, replayed agents searching the corpus inside real sandboxes
(search_corpus, BM25 in the image's toolbox), both scorers, accuracy per type and retrieval recall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.benchmarks.multihoprag.dataset import query_id
from harness.datasets import load_dataset
from harness.report.breakdown import by_field, retrieval_recall
from tests.helpers.e2e import REPO, explain, harness, rows, trace

pytestmark = pytest.mark.docker
SAMPLE = REPO / "datasets" / "multihoprag-sample"

# Per query of MultiHopRAG.json, in file order (scripts/make_multihoprag_sample.py), computed by hand:
# (official word-overlap verdict, GAIA verdict, recall of the evidence by the replayed searches or None).
EXPECTED = [
    (True, True, 1.0),      # inference: Lumina Labs
    (True, True, 1.0),      # inference: Mateo Alvarez, one search finds both articles
    (False, False, 0.5),    # inference: answers Dana Whitfield; top_k=1 finds the funding article only
    (True, True, 1.0),      # comparison: Yes
    (False, False, 1.0),    # comparison: answers Yes, the costs differ (220 vs 310 million)
    (False, True, 1.0),     # comparison: "yes." - the official rule keeps punctuation, GAIA drops it
    (True, True, 1.0),      # temporal: Yes
    (True, True, 1.0),      # temporal: No
    (False, False, 0.5),    # temporal: answers No; top_k=1 finds the dismissal article only
    (True, True, None),     # null: Insufficient information.
    (True, False, None),    # null: "Not enough information." shares "information." (punctuation and all)
    (True, True, None),     # null: Insufficient information.
]


def test_multihoprag_sample_verdicts_types_and_recall(out: Path):
    proc = harness("run", "--dataset", SAMPLE, "--model", "replay", "--scorer", "multihoprag", "--scorer", "gaia",
                   "--output-dir", out, "--workers", 2, timeout=900)
    assert proc.returncode == 0, explain(proc)
    queries = json.loads((SAMPLE / "MultiHopRAG.json").read_text())
    ids = [query_id(q["query"]) for q in queries]
    got = {r["instance_id"]: r for r in rows(out)}
    assert sorted(got) == sorted(ids)
    for number, (instance_id, (official, gaia, _)) in enumerate(zip(ids, EXPECTED, strict=True), start=1):
        scores = got[instance_id]["scores"]
        assert (scores["multihoprag"]["correct"], scores["gaia"]["correct"]) == (official, gaia), (number, scores)
        assert got[instance_id]["correct"] is official  # the first scorer decides

    ordered = [got[i] for i in ids]
    traces = [trace(out, row) for row in ordered]
    for events in traces:  # every agent searched inside its sandbox, and the trace records what came back
        searches = [e for e in events if e["type"] == "env" and e["env"] == "search"]
        assert searches and all(e["outcome"] == "ok" and e["action"] == "search_corpus" for e in searches)
        results = [e for e in events if e["type"] == "tool_result" and e["name"] == "search_corpus"]
        assert len(results) == len(searches)
        for event, result in zip(searches, results, strict=True):  # the model read the same titles and urls
            assert event["results"] and all(h["url"] in result["content"] and h["title"] in result["content"]
                                            for h in event["results"])

    metadata = {i.instance_id: i.metadata for i in load_dataset(SAMPLE).instances}
    recall = retrieval_recall(ordered, traces, metadata)
    assert [r["recall"] for r in recall["per_row"]] == [r for *_, r in EXPECTED if r is not None]
    assert recall["n"] == 9 and recall["mean"] == pytest.approx(8 / 9)
    assert recall["by_question_type"] == pytest.approx(
        {"comparison_query": 1.0, "inference_query": 2.5 / 3, "temporal_query": 2.5 / 3})
    accuracy = by_field(ordered, "question_type", metadata)
    assert {t: (g["n"], g["correct"]) for t, g in accuracy.items()} == {
        "comparison_query": (3, 1), "inference_query": (3, 2), "null_query": (3, 3), "temporal_query": (3, 2)}
    # report.json carries the same figures (run.py wires tasks.json into the report)
    report = json.loads((out / "report.json").read_text())
    assert {t: (g["n"], g["correct"]) for t, g in report["breakdowns"]["question_type"].items()} == {
        t: (g["n"], g["correct"]) for t, g in accuracy.items()}
    assert report["retrieval"]["mean"] == pytest.approx(8 / 9) and report["retrieval"]["n"] == 9
    assert "question_type" in proc.stdout and "evidence recall" in proc.stdout
