"""Issue 39 item 3: a Gaia2 submission ARE can re-judge. One real run of datasets/gaia2-smoke (a scripted agent,
each scenario its own way by epoch, soft checks through a scripted judge model), exported with `--format gaia2`,
then ARE's own offline judge (`are-benchmark judge --hf FOLDER`, in the gaia2 image, the same scripted model) on
the export: ARE re-derives our verdict for every scenario and epoch, once its checkers read a verdict whatever its
case (as ARE's later gaia2-cli judge does); ARE 1.2.0 as shipped fails exactly the runs ours passed through the
sanity checker of a message to the user, its engines lower-casing the `[[True]]` that checker looks for."""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers.e2e import FAKE_KEY_ENV, explain, harness, rows

# Slow, as Harbor's parity test is: a run and ARE's own judge in its image. The default suite keeps the part of the
# rule that is ours: the export carries ARE's trace (tests/test_gaia2_limits.py, tests/test_gaia2_report.py).
pytestmark = [pytest.mark.docker, pytest.mark.slow]
SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"
HELPERS = Path(__file__).resolve().parent / "helpers"
PASSED = "Reasoning: the same.\nEvaluation: [[Success]] [[True]]\n<subtask>Tell the user what was asked</subtask>"
FAILED = "Reasoning: another file.\nEvaluation: [[Failure]] [[False]]\n<subtask>Tell the user what was asked</subtask>"
# (scenario, epoch) -> passed: tests/helpers/gaia2_agents.py `Rejudged`
OURS = {("proto_find_image_file", 1): True, ("proto_find_image_file", 2): False, ("proto_forward_email", 1): True,
        ("proto_forward_email", 2): False, ("proto_multi_turn", 1): True, ("proto_multi_turn", 2): True}
# passed by ARE's soft checks of a message to the user in other words than the oracle's (its sanity checker)
SANITY_CHECKED = {("proto_find_image_file", 1), ("proto_forward_email", 1)}


class ScriptedJudge(FakeOpenAI):
    """The judge model, for the harness and for ARE alike: every check passes but that of the wrong image's name."""

    def respond_chat(self, body: Any, item: Any = None) -> tuple[int, Any, dict]:
        asked = json.dumps(body.get("messages") if isinstance(body, dict) else body)
        return super().respond_chat(body, text(FAILED if "cat.png" in asked else PASSED, usage=(100, 10)))


def _config(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "models.toml"
    config.write_text(f'[llm.judge]\nmodel = "judge-model"\nbase_url = "{url}"\napi_key_env = "{FAKE_KEY_ENV}"\n'
                      'max_retries = 0\n')
    return config


def _are_judge(folder: Path, endpoint: str, out: Path, configs: list[str]) -> dict[str, list[dict]]:
    """tests/helpers/are_judge.py in a container of the gaia2 image (ARE lives there), on the host's network (the
    scripted judge listens on the host's loopback); removed whatever happens, and labelled as the harness's own with
    this process as its owner, so that `harness cleanup` (and the suite's leftover check) finds it should this
    process be killed before its `finally`."""
    import docker

    from harness.sandbox.docker import naming
    from harness.sandbox.docker.images import build_named

    out.mkdir()
    client = docker.from_env()
    container = client.containers.run(
        build_named("gaia2", log=lambda *_: None), entrypoint=["/opt/are/bin/python", "/helpers/are_judge.py"],
        command=["/submission", endpoint, "/out", *configs], user="root", network_mode="host", detach=True,
        environment={"OPENAI_API_KEY": "sk-fake"}, name=f"test-are-judge-{uuid.uuid4().hex[:8]}",
        labels={naming.LABEL_MANAGED: "1", naming.LABEL_OWNER: naming.owner_token()},
        volumes={str(folder): {"bind": "/submission", "mode": "ro"}, str(out): {"bind": "/out", "mode": "rw"},
                 str(HELPERS): {"bind": "/helpers", "mode": "ro"}})
    try:
        ended = container.wait(timeout=600)
        logs = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert ended["StatusCode"] == 0 and (out / "verdicts.json").is_file(), logs[-6000:]
    found: dict[str, list[dict]] = json.loads((out / "verdicts.json").read_text())
    return found


def _by_run(found: list[dict]) -> dict[tuple[str, int], bool]:
    return {(r["task_id"], r["metadata"]["run_number"]): r["score"] == 1.0 for r in found}


def test_ares_own_judge_rederives_our_verdict_of_every_exported_run(tmp_path):
    out, folder = tmp_path / "run", tmp_path / "submission"
    with ScriptedJudge([]) as judge:
        run = harness("run", "--dataset", SMOKE, "--agent", "tests.helpers.gaia2_agents:Rejudged", "--model",
                      "replay", "--judge-model", "judge", "--config", _config(tmp_path, judge.base_url), "--epochs",
                      "2", "--workers", "3", "--output-dir", out)
        assert run.returncode == 0, explain(run)
        got = {(r["instance_id"], r["epoch"]): r for r in rows(out)}
        assert {run_: r["correct"] for run_, r in got.items()} == OURS, explain(run)
        asked_by_us = len(judge.chat_requests)
        assert asked_by_us, "our soft checks asked the judge model nothing"

        exported = harness("export", out, "--format", "gaia2", "--out", folder, "--allow-few-epochs")
        assert exported.returncode == 0, explain(exported)
        assert "without ARE's trace" not in exported.stderr + exported.stdout, explain(exported)
        written = {}
        for parquet in folder.glob("*/validation-*.parquet"):
            for row in pq.read_table(parquet).to_pylist():
                written[(row["scenario_id"], row["run_number"])] = row
        assert sorted(written) == sorted(OURS)
        for run_, row in written.items():  # ARE's trace as the driver wrote it, beside our verdict
            kept = out / got[run_]["trace"].removesuffix(".jsonl")
            assert row["data"] == gzip.decompress(kept.with_name(kept.name + ".are.json.gz").read_bytes()).decode()
            trace = json.loads(row["data"])
            assert trace["version"] == "are_simulation_v1" and trace["completed_events"] and trace["apps"]
            assert trace["metadata"]["definition"]["run_number"] == run_[1]
            assert row["score"] == (1.0 if OURS[run_] else 0.0)

        configs = sorted({p.parent.name for p in folder.glob("*/validation-*.parquet")})
        are = _are_judge(folder, judge.base_url, tmp_path / "are", configs)
        assert len(judge.chat_requests) > asked_by_us, "ARE's judge asked the scripted judge model nothing"

    stock, cased = _by_run(are["stock"]), _by_run(are["cased"])
    assert cased == OURS, are["cased"]  # ARE's judge, reading a verdict whatever its case: ours, run by run
    assert {run_ for run_ in OURS if stock[run_] != OURS[run_]} == SANITY_CHECKED, are["stock"]  # ARE 1.2.0's defect
    assert all(not stock[run_] for run_ in SANITY_CHECKED)
