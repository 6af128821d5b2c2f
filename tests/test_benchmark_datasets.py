"""The MATH-500 and MultiHop-RAG adapters (harness/benchmarks/math500/dataset.py, multihoprag.py) and the
search_corpus tool's wiring (harness/environments/search.py, tools.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from harness.benchmarks.math500.dataset import parse_level
from harness.benchmarks.multihoprag.dataset import query_id
from harness.datasets import load_dataset
from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.search import SearchEnv
from harness.environments.tools import sandbox_tools, schema
from harness.errors import InputError
from harness.sandbox.contract import WORKSPACE, ExecResult
from harness.traces import Tracer
from tests.helpers.e2e import REPO, harness

MATH = REPO / "datasets" / "math500-sample"
RAG = REPO / "datasets" / "multihoprag-sample"


def math_row(uid: str, **over) -> dict:
    return {"problem": "What is 1+1?", "solution": "$\\boxed{2}$", "answer": "2", "subject": "Algebra",
            "level": 1, "unique_id": uid, **over}


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_math500_sample_loads_with_ids_levels_and_metadata():
    instances = load_dataset(MATH).instances
    assert len(instances) >= 24
    first = {i.instance_id: i for i in instances}["test/prealgebra/2.json"]
    assert first.question == "What is $2 + 3$?" and first.answer == "5" and first.level == 1  # "Level 1"
    assert first.metadata["subject"] == "Prealgebra" and "boxed" in first.metadata["solution"]
    assert first.files == [] and "problem" not in first.metadata
    assert load_dataset(MATH / "test.jsonl").instances == instances  # the file itself, as HF ships it


def test_math500_layout_is_detected_by_its_fields_whatever_the_file_name(tmp_path):
    data = write_jsonl(tmp_path / "math.jsonl", [math_row("test/a/1.json", level="Level 5")])
    [instance] = load_dataset(data).instances
    assert (instance.instance_id, instance.level, instance.answer) == ("test/a/1.json", 5, "2")
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"instance_id": "p", "question": "q", "answer": "a"}])
    assert load_dataset(plain).instances[0].metadata == {}  # not MATH-500: the plain form


@pytest.mark.parametrize(("value", "level"), [(3, 3), ("3", 3), ("Level 3", 3), ("level 12", 12), (None, None),
                                              ("", None)])
def test_parse_level(value, level):
    assert parse_level(value) == level


def test_math500_bad_rows_are_each_named(tmp_path):
    write_jsonl(tmp_path / "test.jsonl", [
        math_row("test/a/1.json"), math_row("test/a/2.json", answer=""), math_row("test/a/3.json", level="Level x"),
        math_row("test/a/1.json"), "{not json", json.dumps(["a list"])])
    with pytest.raises(InputError) as caught:
        load_dataset(tmp_path)
    message = str(caught.value)
    assert "5 problem(s)" in message
    assert "line 2: empty or missing 'answer'" in message
    assert "line 3: level 'Level x'" in message
    assert "line 4: duplicate unique_id 'test/a/1.json' (first at line 1)" in message
    assert "line 5: invalid JSON" in message and "line 6: expected a JSON object, got list" in message


def test_multihoprag_sample_loads_queries_with_the_corpus_attached():
    instances = load_dataset(RAG).instances
    queries = json.loads((RAG / "MultiHopRAG.json").read_text())
    assert [i.instance_id for i in instances] == [query_id(q["query"]) for q in queries]
    assert all(i.files == ["corpus.json"] and i.root == RAG.resolve() for i in instances)
    first = instances[0]
    assert first.question == queries[0]["query"] and first.answer == "Lumina Labs"
    assert first.metadata["question_type"] == "inference_query" and first.metadata["corpus"] == "corpus.json"
    assert [e["url"] for e in first.metadata["evidence"]] == [e["url"] for e in queries[0]["evidence_list"]]
    assert {i.metadata["question_type"] for i in instances} == {
        "inference_query", "comparison_query", "temporal_query", "null_query"}
    assert load_dataset(RAG / "MultiHopRAG.json").instances == instances


def rag_folder(tmp_path: Path, queries: list, corpus: list) -> Path:
    (tmp_path / "MultiHopRAG.json").write_text(json.dumps(queries))
    (tmp_path / "corpus.json").write_text(json.dumps(corpus))
    return tmp_path


def test_multihoprag_repeated_queries_get_distinct_stable_ids(tmp_path):
    item = {"query": "Who?", "answer": "Ann", "question_type": "inference_query", "evidence_list": []}
    folder = rag_folder(tmp_path, [item, item], [{"title": "t", "body": "b"}])
    assert [i.instance_id for i in load_dataset(folder).instances] == [query_id("Who?"), query_id("Who?") + "-2"]


def test_multihoprag_bad_items_and_articles_are_each_named(tmp_path):
    good = {"query": "Who?", "answer": "Ann", "question_type": "inference_query", "evidence_list": []}
    folder = rag_folder(tmp_path, [good, {**good, "query": ""}, {**good, "query": "Q2", "evidence_list": "x"},
                                   {**good, "query": "Q3", "question_type": None}],
                        [{"title": "t", "body": "b"}, {"title": "no body"}, "text"])
    with pytest.raises(InputError) as caught:
        load_dataset(folder)
    message = str(caught.value)
    assert "5 problem(s)" in message
    assert "corpus.json item 2: empty or missing 'body'" in message
    assert "corpus.json item 3: expected an object, got str" in message
    assert "MultiHopRAG.json item 2: empty or missing 'query'" in message
    assert f"MultiHopRAG.json item 3 (id {query_id('Q2')!r}): 'evidence_list' must be a list" in message
    assert "MultiHopRAG.json item 4" in message and "'question_type'" in message


def test_bad_benchmark_rows_exit_2_before_any_sandbox(tmp_path):
    write_jsonl(tmp_path / "test.jsonl", [math_row("test/a/1.json"), math_row("test/a/2.json", problem=" ")])
    write_jsonl(tmp_path / "replay.jsonl", [])
    out = tmp_path / "out"
    proc = harness("run", "--dataset", tmp_path, "--model", "replay", "--scorer", "math", "--output-dir", out)
    assert proc.returncode == 2, proc.stderr
    assert "line 2: empty or missing 'problem'" in proc.stderr
    assert not (out / "output.jsonl").exists() and not (out / "traces").exists()


class CannedSandbox:
    """Answers every exec with one canned stdout, and keeps the argv it was given."""

    workdir = WORKSPACE  # as every Sandbox has one (the code tools name it)

    def __init__(self, stdout: str):
        self.stdout, self.calls = stdout, []

    def exec(self, argv, **kwargs):
        self.calls.append(list(argv))
        return ExecResult(exit_code=0, stdout=self.stdout, stderr="")


class CodeStub:
    def __init__(self, sandbox, tracer):
        self.sandbox, self.tracer = sandbox, tracer


HITS = [{"title": "Orion-7", "url": "https://t.example/orion", "source": "T", "published_at": "2023-09-12",
         "text": "Dana Whitfield unveiled it.", "score": 2.5}]


def test_search_corpus_is_offered_only_for_an_instance_with_a_corpus(tmp_path):
    tracer = Tracer(tmp_path / "trace.jsonl")
    sandbox = CannedSandbox(json.dumps({"results": HITS}))
    envs = Environments({"code": CodeStub(sandbox, tracer), "files": None})
    plain = Instance(instance_id="a", question="q", root=tmp_path)
    rag = Instance(instance_id="b", question="q", root=tmp_path, files=["corpus.json"],
                   metadata={"corpus": "corpus.json"})
    assert "search_corpus" not in [f.__name__ for f in sandbox_tools(envs, plain)]
    assert "search_corpus" not in [f.__name__ for f in sandbox_tools(envs)]
    search = {f.__name__: f for f in sandbox_tools(envs, rag)}["search_corpus"]
    assert set(schema(search)["function"]["parameters"]["properties"]) == {"query", "top_k"}
    text = asyncio.run(search("Orion chip", 50))
    assert "[1] Orion-7" in text and "https://t.example/orion" in text and "Dana Whitfield" in text
    argv = sandbox.calls[0]
    assert argv[0] == "python3" and argv[3:] == ["corpus.json", "Orion chip", "20", "150"]  # top_k capped
    tracer.close()
    [event] = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert (event["env"], event["action"], event["outcome"]) == ("search", "search_corpus", "ok")
    assert event["results"] == [{"title": "Orion-7", "url": "https://t.example/orion", "score": 2.5}]


def test_search_errors_reach_the_model_and_the_trace(tmp_path):
    tracer = Tracer(tmp_path / "trace.jsonl")
    env = SearchEnv(CannedSandbox(json.dumps({"error": "no corpus at 'corpus.json'"})), tracer, "corpus.json")
    assert env.search("x") == "Error: no corpus at 'corpus.json'"
    garbled = SearchEnv(CannedSandbox("Traceback ..."), tracer, "corpus.json")
    assert garbled.search("x").startswith("Error: search failed (exit 0)")
    tracer.close()
    events = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert [e["outcome"] for e in events] == ["error", "error"]


def test_each_benchmark_gets_its_own_answer_conventions():
    from pathlib import Path

    from harness.datasets.model import Instance
    from harness.runner.prompt import instruction

    def prompt(benchmark):
        return instruction(Instance(instance_id="a", question="Q?", root=Path("/tmp"),
                                    benchmark=benchmark or "gaia"))

    assert "LaTeX" in prompt("math500") and "GAIA" not in prompt("math500")
    assert "Insufficient information." in prompt("multihoprag") and "search_corpus" in prompt("multihoprag")
    assert "GAIA conventions" in prompt(None)
