"""Per-task expectations from the dataset (the seed's task schema): aliases, limits, scorers."""

from __future__ import annotations

import json

import pytest

from harness.agents.contract import Limits
from harness.datasets import load_dataset
from harness.errors import InputError
from tests.helpers.e2e import explain, harness, rows


def write(tmp_path, *records):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_seed_field_names_and_expectations_load(tmp_path):
    (inst,) = load_dataset(write(tmp_path, {"id": "t1", "prompt": "Add 2 and 2.", "expected_answer": "4",
                                            "expected_tool_calls": ["run_python"], "max_steps": 3,
                                            "max_tokens": 500, "topic": "arith"})).instances
    assert (inst.instance_id, inst.question, inst.answer) == ("t1", "Add 2 and 2.", "4")
    assert (inst.expected_tool_calls, inst.max_steps, inst.max_tokens) == (["run_python"], 3, 500)
    assert inst.metadata == {"topic": "arith"}
    assert inst.limited(Limits(max_steps=30, max_tokens=None)) == Limits(max_steps=3, max_tokens=500)
    assert inst.limited(Limits(max_steps=2, max_tokens=100)) == Limits(max_steps=2, max_tokens=100)  # run's stricter


def test_csv_expectations_are_semicolon_joined(tmp_path):
    path = tmp_path / "tasks.csv"
    path.write_text("instance_id,question,answer,expected_tool_calls\na,q,1,run_python;visit_url\n")
    assert load_dataset(path).instances[0].expected_tool_calls == ["run_python", "visit_url"]


@pytest.mark.parametrize("bad,message", [({"max_steps": 0}, "'max_steps' 0"), ({"max_tokens": "many"}, "'max_tokens'"),
                                         ({"expected_tool_calls": {"a": 1}}, "'expected_tool_calls'")])
def test_bad_expectations_name_the_row(tmp_path, bad, message):
    with pytest.raises(InputError, match=f"line 2 \\(id 'b'\\): {message}"):
        load_dataset(write(tmp_path, {"id": "a", "prompt": "q", "expected_answer": "1"},
                           {"id": "b", "prompt": "q", "expected_answer": "1", **bad}))


def test_a_task_s_max_steps_is_enforced_and_its_tools_are_scored(tmp_path):
    (tmp_path / "nums.csv").write_text("x\n1\n2\n3\n")
    code = {"tool_calls": [{"name": "run_python", "arguments": {"code": "print(6)"}}]}
    answer = {"content": "<solution>6</solution>"}
    data = write(tmp_path, {"id": "short", "prompt": "Sum x.", "expected_answer": "6", "files": ["nums.csv"],
                            "max_steps": 1, "expected_tool_calls": ["run_python"]},
                 {"id": "roomy", "prompt": "Sum x.", "expected_answer": "6", "files": ["nums.csv"],
                  "expected_tool_calls": ["run_python", "visit_url"]},
                 {"id": "exact", "prompt": "Sum x.", "expected_answer": "6", "files": ["nums.csv"], "max_steps": 2,
                  "expected_tool_calls": ["run_python"]})
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"instance_id": i, "turns": [code, answer]}) + "\n"
                              for i in ("short", "roomy", "exact")))
    config = tmp_path / "config.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    out = tmp_path / "out"
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--scorer", "gaia", "--scorer", "tool_calls", "--scorer", "budget")
    assert proc.returncode == 0, explain(proc)
    got = {r["instance_id"]: r for r in rows(out)}
    assert got["short"]["status"] == "limit" and got["short"]["limit"] == "max_steps" and got["short"]["steps"] == 1
    assert got["roomy"]["status"] == "ok" and got["roomy"]["correct"] is True
    assert got["exact"]["scores"]["tool_calls"]["correct"] is True and got["exact"]["scores"]["budget"]["correct"]
    assert got["roomy"]["scores"]["tool_calls"]["details"]["missing"] == ["visit_url"]
    assert json.loads((out / "tasks.json").read_text())["short"] == {
        "expected_tool_calls": ["run_python"], "max_steps": 1}
    # A rescore rebuilds the same context: the task's tools and its own step limit.
    again = harness("score", out, "--scorer", "tool_calls", "--scorer", "budget")
    assert again.returncode == 0, explain(again)
    rescored = {r["instance_id"]: r for r in rows(out)}
    assert rescored["roomy"]["scores"]["tool_calls"]["correct"] is False
    assert rescored["exact"]["scores"]["tool_calls"]["correct"] is True
    assert rescored["exact"]["scores"]["budget"]["details"]["unchecked"] == ["tokens"]  # steps: its own limit
