"""The Gaia2 adapter (harness/benchmarks/gaia2/dataset.py): ARE scenario exports, a folder of them or a JSONL (the
scenarios themselves or Hugging Face rows), into instances; every bad scenario named. No Docker, no ARE."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.benchmarks.gaia2.dataset import detect
from harness.datasets import load_dataset
from harness.errors import InputError
from harness.settings import settings
from tests.helpers.e2e import REPO, harness

SMOKE = REPO / "datasets" / "gaia2-smoke"
IDS = ["proto_find_image_file", "proto_forward_email", "proto_multi_turn"]
QUESTIONS = ["I need to find the image file in the current directory. Reply with its file name.",
             "Greg Barty will email me a list of music in a moment. As soon as it arrives, forward that email to "
             "John Doe, then tell me.",
             "What is John Doe's email address?"]
# (capability, nb_turns, oracle_actions) of each, as scripts/make_gaia2_smoke.py writes them
FACTS = [("search", 1, 1), ("adaptability", 1, 2), ("execution", 2, 3)]


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch) -> Path:
    """A state folder of the test's own (a JSONL's scenarios are written there)."""
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    settings.cache_clear()
    yield tmp_path / "state"
    settings.cache_clear()


def smoke(name: str) -> dict:
    return json.loads((SMOKE / f"{name}.json").read_text())


def hub_rows(path: Path, scenarios: list) -> Path:
    """A JSONL of Hugging Face rows (id, scenario_id, split, data: the scenario as a JSON string)."""
    def row(n: int, scenario) -> dict:
        text = scenario if isinstance(scenario, str) else json.dumps(scenario)
        scenario_id = scenario["metadata"]["definition"].get("scenario_id") if isinstance(scenario, dict) else None
        return {"id": f"row-{n}", "scenario_id": scenario_id, "split": "validation", "data": text}

    path.write_text("".join(json.dumps(row(n, s)) + "\n" for n, s in enumerate(scenarios)))
    return path


def facts(instances) -> list[tuple]:
    return [(i.metadata["capability"], i.metadata["nb_turns"], i.metadata["oracle_actions"]) for i in instances]


def test_the_smoke_folder_loads_one_instance_per_scenario():
    instances = load_dataset(SMOKE).instances
    assert [i.instance_id for i in instances] == IDS
    assert [i.question for i in instances] == QUESTIONS
    assert facts(instances) == FACTS
    for instance in instances:
        name = f"{instance.instance_id}.json"
        assert (instance.image, instance.answer, instance.files) == ("gaia2", "pass", [name])
        assert instance.root == SMOKE.resolve()
        assert instance.metadata["scenario_file"] == name and instance.metadata["variant"] == "standard"
        assert instance.benchmark == "gaia2"


def test_a_jsonl_of_hub_rows_or_of_scenarios_loads_the_same(tmp_path, state):
    folder = load_dataset(SMOKE).instances
    scenarios = [smoke(name) for name in IDS]
    rows = hub_rows(tmp_path / "validation.jsonl", scenarios)
    plain = tmp_path / "scenarios.jsonl"
    plain.write_text("".join(json.dumps(s) + "\n\n" for s in scenarios))  # a blank line is passed over
    for data in (rows, plain):
        instances = load_dataset(data).instances
        assert [(i.instance_id, i.question, i.image) for i in instances] == \
            [(i.instance_id, i.question, i.image) for i in folder]
        assert facts(instances) == FACTS
        for instance, scenario in zip(instances, scenarios, strict=True):
            assert instance.files == ["scenario.json"] and instance.metadata["scenario_file"] == "scenario.json"
            assert instance.root.parent == state / "gaia2"
            assert json.loads((instance.root / "scenario.json").read_text()) == scenario
    # One folder a scenario, named by its text's digest: the same text (a row's data, a line) is written once.
    assert len(list((state / "gaia2").iterdir())) == 3


def test_the_first_user_message_is_the_one_without_dependencies(tmp_path):
    scenario = smoke("proto_multi_turn")
    scenario["events"].reverse()  # the second turn's message comes first in the file, but depends on the first
    assert [e["event_id"] for e in scenario["events"]].index("turn2_user") == 2
    (instance,) = load_dataset(hub_rows(tmp_path / "rows.jsonl", [scenario])).instances
    assert instance.question == "What is John Doe's email address?" and instance.metadata["nb_turns"] == 2


def test_capability_comes_from_the_tags_else_the_config(tmp_path):
    scenarios = []
    for n, (tags, config) in enumerate([(["Time"], None), (["UnitTest", "Ambiguity"], None), ([], "search"),
                                        (None, "mini"), (["Universe"], None)]):
        scenario = smoke("proto_find_image_file")
        scenario["metadata"]["definition"].update(scenario_id=f"s{n}", tags=tags, config=config)
        scenarios.append(scenario)
    instances = load_dataset(hub_rows(tmp_path / "rows.jsonl", scenarios)).instances
    assert [i.metadata["capability"] for i in instances] == ["time", "ambiguity", "search", None, "universe"]


def test_detection_wants_an_are_export(tmp_path):
    assert detect(SMOKE) == SMOKE and detect(SMOKE / "proto_multi_turn.json") is None
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "a.json").write_text(json.dumps({"version": "1", "metadata": {}}))
    assert detect(tmp_path / "other") is None
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"instance_id": "a", "question": "q", "answer": "1", "data": "not json"}) + "\n")
    assert detect(plain) is None and load_dataset(plain).instances[0].instance_id == "a"  # the plain form


def bad_scenarios() -> dict[str, object]:
    """One scenario for each kind of problem, by the name it is filed under (the first one is good)."""
    good = smoke("proto_forward_email")
    wrong_version, no_id, no_user, shapeless = (copy.deepcopy(good) for _ in range(4))
    wrong_version["version"] = "are_simulation_v0"
    wrong_version["metadata"]["definition"]["scenario_id"] = "old"
    del no_id["metadata"]["definition"]["scenario_id"]
    no_user["metadata"]["definition"]["scenario_id"] = "silent"
    no_user["events"] = [e for e in no_user["events"] if e["event_type"] != "USER"]
    shapeless["metadata"]["definition"]["scenario_id"] = "shapeless"
    shapeless["events"][1]["dependencies"] = "user_request"
    return {"a_good": good, "b_broken": "{not json", "c_version": wrong_version, "d_no_id": no_id,
            "e_no_user": no_user, "f_shapeless": shapeless, "g_again": good}


def test_every_bad_scenario_of_a_folder_is_named_with_its_file(tmp_path):
    for name, scenario in bad_scenarios().items():
        (tmp_path / f"{name}.json").write_text(scenario if isinstance(scenario, str) else json.dumps(scenario))
    with pytest.raises(InputError) as caught:
        load_dataset(tmp_path)
    message = str(caught.value)
    assert f"dataset {tmp_path} (Gaia2 layout): 6 problem(s)" in message
    assert "b_broken.json: invalid JSON" in message
    assert "c_version.json (scenario 'old'): version 'are_simulation_v0' is not 'are_simulation_v1'" in message
    assert "d_no_id.json: no metadata.definition.scenario_id" in message
    assert "e_no_user.json (scenario 'silent'): no first user message" in message
    assert "f_shapeless.json (scenario 'shapeless'): not the structure ARE reads: events.1" in message
    assert "g_again.json (scenario 'proto_forward_email'): duplicate scenario id (first at a_good.json)" in message
    assert "a_good.json" not in message.replace("(first at a_good.json)", "")


def test_every_bad_line_of_a_jsonl_is_named_with_its_line(tmp_path, state):
    data = hub_rows(tmp_path / "rows.jsonl", list(bad_scenarios().values()))
    with pytest.raises(InputError) as caught:
        load_dataset(data)
    message = str(caught.value)
    assert f"dataset {data} (Gaia2 layout): 6 problem(s)" in message
    for expected in ("line 2: invalid JSON", "line 3 (scenario 'old'): version", "line 4: no metadata.definition",
                     "line 5 (scenario 'silent'): no first user message", "line 6 (scenario 'shapeless'): not the",
                     "line 7 (scenario 'proto_forward_email'): duplicate scenario id (first at line 1)"):
        assert expected in message, expected
    assert len(list((state / "gaia2").iterdir())) == 1  # the good line 1: nothing is written after a problem
    with pytest.raises(InputError, match="--split 'validation' applies to a GAIA dataset folder"):
        load_dataset(SMOKE, "validation")


def test_a_bad_gaia2_dataset_exits_2_before_any_sandbox(tmp_path):
    (tmp_path / "data").mkdir()
    for name, scenario in list(bad_scenarios().items())[:2]:
        (tmp_path / "data" / f"{name}.json").write_text(scenario if isinstance(scenario, str) else json.dumps(scenario))
    out = tmp_path / "out"
    proc = harness("run", "--dataset", tmp_path / "data", "--model", "replay", "--output-dir", out)
    assert proc.returncode == 2, proc.stderr
    assert "b_broken.json: invalid JSON" in proc.stderr and not out.exists()


def unreadable_scenarios() -> dict[str, str]:
    """Scenario files, by name, whose JSON is too deep or whose numbers are not finite or out of the clock's range:
    each broke the run as a RecursionError (exit 1) or in ARE's clock in the sandbox (infra, retried three times)."""
    def edited(scenario_id: str, edit) -> str:
        scenario = smoke("proto_forward_email")
        scenario["metadata"]["definition"]["scenario_id"] = scenario_id
        edit(scenario)
        return json.dumps(scenario)

    nested = smoke("proto_forward_email")
    nested["metadata"]["definition"]["scenario_id"] = "nested"
    nested["apps"][0]["state"] = "DEEP"
    return {"a_deep": "[" * 100_000 + "]" * 100_000,
            "b_nested": json.dumps(nested).replace('"DEEP"', "[" * 500 + "]" * 500),
            "c_nan": edited("nan", lambda s: s["events"][0].update(event_relative_time=float("nan"))),
            "d_far": edited("far", lambda s: s["metadata"]["definition"].update(start_time=1e308)),
            "e_inf": edited("inf", lambda s: s["metadata"]["definition"].update(duration=float("inf"))),
            "f_overflow": edited("overflow", lambda s: s["apps"][0].update(state="OVER")).replace('"OVER"', "1e999"),
            "g_negative": edited("negative", lambda s: s["events"][-1].update(event_time=-5.0)),
            "h_good": json.dumps(smoke("proto_forward_email"))}


def test_deep_or_non_finite_scenario_json_is_named_with_its_file(tmp_path):
    for name, text in unreadable_scenarios().items():
        (tmp_path / f"{name}.json").write_text(text)
    (tmp_path / "a_deep.json").rename(tmp_path / "z_deep.json")  # after a scenario: the folder is Gaia2's
    with pytest.raises(InputError) as caught:
        load_dataset(tmp_path)
    message = str(caught.value)
    assert f"dataset {tmp_path} (Gaia2 layout): 7 problem(s)" in message, message
    for expected in ("z_deep.json: JSON nested deeper than 200 levels", "b_nested.json: JSON nested deeper than 200",
                     "c_nan.json: the number NaN is not finite", "f_overflow.json: the number 1e999 is not finite",
                     "d_far.json (scenario 'far'): not the structure ARE reads: metadata.definition.start_time: "
                     "Input should be less than or equal to 80000000000",
                     "e_inf.json: the number Infinity is not finite",
                     "g_negative.json (scenario 'negative'): not the structure ARE reads: events.3.event_time: "
                     "Input should be greater than or equal to 0"):
        assert expected in message, (expected, message)
    assert "h_good" not in message


def test_a_deep_scenario_is_exit_2_naming_its_file_before_any_sandbox(tmp_path):
    (tmp_path / "data").mkdir()
    scenarios = unreadable_scenarios()
    for name in ("a_deep", "h_good"):
        (tmp_path / "data" / f"{name}.json").write_text(scenarios[name])
    out = tmp_path / "out"
    proc = harness("run", "--dataset", tmp_path / "data", "--model", "replay", "--output-dir", out)
    assert proc.returncode == 2, proc.stderr
    assert "a_deep.json: JSON nested deeper than 200 levels" in proc.stderr and not out.exists(), proc.stderr
    assert "RecursionError" not in proc.stderr
    deep_line = tmp_path / "deep.jsonl"  # a JSONL whose first line is that deep: read by whichever adapter
    deep_line.write_text(scenarios["a_deep"] + "\n" + scenarios["h_good"] + "\n")
    proc = harness("run", "--dataset", deep_line, "--model", "replay", "--output-dir", out)
    assert proc.returncode == 2 and f"dataset {deep_line}: holds JSON nested too deep" in proc.stderr, proc.stderr
