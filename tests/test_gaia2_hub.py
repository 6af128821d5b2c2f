"""Gaia2 from the Hub: `--dataset hf://meta-agents-research-environments/gaia2@REV --subset CONFIG` through the
same Hub code as GAIA (harness/datasets/hub.py), offline against a cache this test builds in the library's layout
with Gaia2's: one folder per config holding ``validation-00000-of-00001.parquet`` of rows ``id, scenario_id,
split, data`` (the scenario as a JSON string). A local copy of that layout reads the same with --subset."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.datasets import load_dataset
from harness.errors import InputError
from tests.helpers.e2e import REPO, explain, harness, no_traceback, out_dir
from tests.test_gaia2_dataset import state  # noqa: F401 - its autouse fixture: the test's own state folder
from tests.test_hub_datasets import hub_cache, hub_env, parquet

REPO_ID = "meta-agents-research-environments/gaia2"
SHA = "3" * 40
SMOKE = REPO / "datasets" / "gaia2-smoke"
PARQUET = "validation-00000-of-00001.parquet"


def scenario(name: str, scenario_id: str, **definition) -> dict:
    found = json.loads((SMOKE / f"{name}.json").read_text())
    found["metadata"]["definition"].update(scenario_id=scenario_id, **definition)
    return found


def rows(scenarios: list) -> bytes:
    """A config's parquet file as the Hub holds it."""
    return parquet([{"id": f"row-{n}", "scenario_id": s["metadata"]["definition"]["scenario_id"] if isinstance(s, dict)
                     else None, "split": "validation", "data": s if isinstance(s, str) else json.dumps(s)}
                    for n, s in enumerate(scenarios)])


def configs() -> dict[str, bytes]:
    """Two configs: execution (no capability tag: the config names it) and mini (mixed, by their tags)."""
    execution = [scenario("proto_multi_turn", "exec_1", tags=None), scenario("proto_find_image_file", "exec_2",
                                                                               tags=["Execution"])]
    mini = [scenario("proto_forward_email", "mini_1"), scenario("proto_find_image_file", "mini_2", tags=["Search"],
                                                                has_a2a_augmentation=True)]
    return {"README.md": b"---\nconfigs: []\n---\n", f"execution/{PARQUET}": rows(execution),
            f"mini/{PARQUET}": rows(mini)}


def load(tmp_path: Path, reference: str, subset: str | None, split: str | None = None) -> dict:
    """load_dataset in a fresh interpreter (the library reads its variables at import), offline."""
    code = ("import json, sys; from harness.datasets import load_dataset; from harness.errors import InputError\n"
            "try:\n    d = load_dataset(sys.argv[1], sys.argv[3] or None, sys.argv[2] or None)\n"
            "except InputError as e:\n    print(json.dumps({'error': str(e)})); sys.exit(0)\n"
            "print(json.dumps({'revision': d.revision, 'instances': [{'id': i.instance_id, 'files': i.files, "
            "'root': str(i.root), 'capability': i.metadata['capability'], 'variant': i.metadata['variant']} "
            "for i in d.instances]}))")
    proc = subprocess.run([sys.executable, "-c", code, reference, subset or "", split or ""], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **hub_env(tmp_path)}, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_gaia2_config_is_read_from_the_hub_cache_offline_at_its_commit(tmp_path):
    hub_cache(tmp_path / "hub", REPO_ID, SHA, configs())
    got = load(tmp_path, f"hf://{REPO_ID}@{SHA}", "execution")
    assert got["revision"] == SHA, got
    assert [(i["id"], i["capability"], i["variant"]) for i in got["instances"]] == \
        [("exec_1", "execution", "standard"), ("exec_2", "execution", "standard")]  # exec_1's from the config
    for instance in got["instances"]:  # each row's scenario written once as the file the sandbox gets
        assert instance["files"] == ["scenario.json"]
        sent = json.loads((Path(instance["root"]) / "scenario.json").read_text())
        assert sent["metadata"]["definition"]["scenario_id"] == instance["id"]
    mini = load(tmp_path, f"hf://{REPO_ID}", "mini", "validation")  # main, through refs/main
    assert mini["revision"] == SHA
    assert [(i["id"], i["capability"], i["variant"]) for i in mini["instances"]] == \
        [("mini_1", "adaptability", "standard"), ("mini_2", "search", "agent2agent")]


def test_the_repositorys_root_without_a_subset_is_refused_naming_its_configs(tmp_path):
    hub_cache(tmp_path / "hub", REPO_ID, SHA, configs())
    got = load(tmp_path, f"hf://{REPO_ID}@{SHA}", None)
    assert "name one of its configs with --subset (execution, mini)" in got["error"], got
    missing = load(tmp_path, f"hf://{REPO_ID}@{SHA}", "time")
    assert "--subset time: the dataset hf://" in missing["error"] and "(its folders: execution, mini;" in \
        missing["error"], missing
    split = load(tmp_path, f"hf://{REPO_ID}@{SHA}", "mini", "test")
    assert "--split test:" in split["error"] and "(its splits: validation)" in split["error"], split


def test_offline_without_a_cached_copy_exits_2_saying_so(tmp_path):
    proc = harness("run", "--dataset", f"hf://{REPO_ID}@{SHA}", "--subset", "mini", "--model", "replay",
                   "--agent", "oracle", "--scorer", "gaia2", "--output-dir", out_dir(tmp_path), env=hub_env(tmp_path))
    assert proc.returncode == 2, explain(proc)
    assert "HF_HUB_OFFLINE is set and the Hub cache" in proc.stderr and "(subset 'mini')" in proc.stderr, explain(proc)
    no_traceback(proc)


def test_a_bad_scenario_of_a_parquet_config_is_named_with_its_row_and_id(tmp_path):
    broken = scenario("proto_forward_email", "bad_one")
    del broken["events"][0]["event_id"]
    local = tmp_path / "gaia2"
    (local / "search").mkdir(parents=True)
    (local / "search" / PARQUET).write_bytes(rows([scenario("proto_find_image_file", "ok_1"), broken, "{not json"]))
    with pytest.raises(InputError) as caught:
        load_dataset(local, subset="search")
    message = str(caught.value)
    assert f"{PARQUET} row 2 (scenario 'bad_one'): not the structure ARE reads" in message, message
    assert f"{PARQUET} row 3: invalid JSON" in message
    with pytest.raises(InputError, match="a subset is the name of one folder"):
        load_dataset(local, subset="../search")


def test_a_local_copy_of_the_layout_reads_as_the_hubs_with_the_variant_of_its_config(tmp_path):
    local = tmp_path / "gaia2"
    for name, content in configs().items():
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_bytes(content)
    noisy = copy.deepcopy(scenario("proto_forward_email", "noisy_1"))
    (local / "mini_noise").mkdir()
    (local / "mini_noise" / PARQUET).write_bytes(rows([noisy]))
    assert [i.instance_id for i in load_dataset(local, subset="execution").instances] == ["exec_1", "exec_2"]
    (instance,) = load_dataset(local, subset="mini_noise").instances
    assert (instance.metadata["variant"], instance.metadata["capability"]) == ("noise", "adaptability")


@pytest.mark.docker
def test_a_run_of_a_hub_config_pins_its_commit_and_refuses_a_moved_main(tmp_path):
    """A smoke scenario as the Hub's mini config: the oracle solves it from its parquet row (written as the
    sandbox's scenario file), run.json pins the commit and the subset, and a resume after main moved is refused.
    One scenario: test_gaia2_run plays all three from their files, and the tests above read configs of several rows."""
    smoke = [json.loads((SMOKE / "proto_forward_email.json").read_text())]
    hub_cache(tmp_path / "hub", REPO_ID, SHA, {f"mini/{PARQUET}": rows(smoke)})
    out, config = out_dir(tmp_path), tmp_path / "replay.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{SMOKE / "replay.jsonl"}"\n')  # the oracle calls none
    args = ("run", "--dataset", f"hf://{REPO_ID}", "--subset", "mini", "--agent", "oracle", "--model", "rec",
            "--config", config, "--scorer", "gaia2", "--epochs", "1", "--output-dir", out)
    proc = harness(*args, env=hub_env(tmp_path))
    assert proc.returncode == 0, explain(proc)
    got = [json.loads(line) for line in (out / "output.jsonl").read_text().splitlines()]
    assert [r["instance_id"] for r in got] == ["proto_forward_email"]
    assert all(r["correct"] is True for r in got), explain(proc)
    run = json.loads((out / "run.json").read_text())
    assert (run["dataset"], run["dataset_revision"], run["dataset_subset"]) == (f"hf://{REPO_ID}", SHA, "mini")
    hub_cache(tmp_path / "hub", REPO_ID, "4" * 40, {f"mini/{PARQUET}": rows(smoke)})  # main moved, same rows
    moved = harness(*args, env=hub_env(tmp_path))
    assert moved.returncode == 2 and f"dataset_revision changed ({SHA} -> {'4' * 40})" in moved.stderr, explain(moved)


def test_a_configs_phase_is_named_as_ares_names_it_and_agent2agent_on_a_replay_model_is_refused(tmp_path):
    """`--subset mini_noise` is the mini config in Gaia2's noise phase (ARE's gaia2-submit names it so; the Hub has
    only `mini`): every scenario's variant is noise, which the driver runs with ARE's noise (--noise). The
    agent2agent phase runs ARE's app agents on the agent's model, which a replay model (the oracle's default)
    cannot be: exit 2 before any container, naming the scenarios (tests/test_gaia2_a2a.py runs the phase)."""
    hub_cache(tmp_path / "hub", REPO_ID, SHA, configs())
    noise = load(tmp_path, f"hf://{REPO_ID}@{SHA}", "mini_noise")
    assert [(i["id"], i["variant"]) for i in noise["instances"]] == [("mini_1", "noise"), ("mini_2", "noise")]
    proc = harness("run", "--dataset", f"hf://{REPO_ID}@{SHA}", "--subset", "mini_a2a", "--agent", "oracle",
                   "--scorer", "gaia2", "--output-dir", out_dir(tmp_path), env=hub_env(tmp_path))
    assert proc.returncode == 2, explain(proc)
    assert "mini_1: Gaia2's agent2agent phase" in proc.stderr and "mini_2:" in proc.stderr, explain(proc)
    assert "a replay model (replay) cannot serve" in proc.stderr, explain(proc)
    assert not (out_dir(tmp_path) / "output.jsonl").exists()
    no_traceback(proc)
