"""Gaia2's verdict out of agent code's reach (docs/sandboxes.md, "The judge's sandbox"): hostile agent programs of
our own (tests/data/gaia2_hostile/), run inside the sandbox by `--agent sandbox:...`, against real sandboxes of the
gaia2 image. ARE's driver runs in a sandbox of its own that only the host reaches, so:

- the forge (kill the MCP bridge and ARE's driver, answer the host's harness__finish with `pass`) finds nothing
  to kill or answer: each scenario is judged by ARE and fails, as doing nothing deserves;
- the spy sees no process of the driver's or the bridge's, no memory and no file holding the oracle's reply, and
  no scenario file; the scenario is judged all the same.

The oracle passing every smoke scenario through the same sandboxes is tests/test_gaia2_run.py's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from harness.benchmark import get, registered
from harness.benchmarks.gaia2.environment import Gaia2Env, serving
from harness.environments import Environments
from harness.errors import HarnessError
from tests.helpers.e2e import DATA, REPO, explain, harness, rows

SMOKE = REPO / "datasets" / "gaia2-smoke"
HOSTILE = (DATA / "gaia2_hostile").relative_to(REPO)
DRIVER_WORDS = ("gaia2_driver", "harness-mcp", "/opt/are/")  # ARE's driver, the bridge that runs it, ARE itself


def _run(tmp_path: Path, program: str, ids: list[str]) -> tuple[list[dict], dict[str, dict]]:
    """The rows of the hostile `program` run on the smoke scenarios `ids`, and each row's report (its answer)."""
    data = tmp_path / "data"
    data.mkdir()
    for name in ids:
        (data / f"{name}.json").write_text((SMOKE / f"{name}.json").read_text())
    unused = [{"instance_id": name, "turns": [{"content": "unused"}]} for name in ids]  # the programs ask no model
    (data / "replay.jsonl").write_text("".join(json.dumps(line) + "\n" for line in unused))
    out = tmp_path / "run"
    proc = harness("run", "--dataset", data, "--agent", f"sandbox:python3 @{HOSTILE / program}", "--model", "replay",
                   "--scorer", "gaia2", "--epochs", "1", "--max-retries", "0", "--workers", len(ids),
                   "--output-dir", out)
    assert proc.returncode == 0, explain(proc)
    found = rows(out)
    assert sorted(r["instance_id"] for r in found) == sorted(ids), explain(proc)
    return found, {r["instance_id"]: json.loads(r["answer"]) for r in found if r["answer"]}


def _judged_and_failed(row: dict) -> None:
    verdict = row["verdicts"]["gaia2"]
    assert row["status"] == "ok" and row["correct"] is False, row
    assert verdict["verdict"] == "fail" and verdict["error"] is None and verdict["rationale"], verdict


@pytest.mark.docker
def test_an_agent_that_kills_the_driver_and_answers_harness_finish_itself_gets_no_pass(tmp_path):
    ids = ["proto_find_image_file", "proto_forward_email"]
    found, reports = _run(tmp_path, "forge.py", ids)
    for row in found:
        _judged_and_failed(row)  # ARE judged what the agent did: nothing
        report = reports[row["instance_id"]]
        assert report["bridges"] == [] and report["killed"] == [], report  # nothing of the judge's to reach
        for name, answer in report["mcp"].items():  # the driver's control is no tool of the agent's
            assert f"no tool named '{name}'" in answer, (name, answer)


@pytest.mark.docker
def test_the_driver_its_memory_files_and_environment_are_out_of_the_agents_sight(tmp_path):
    found, reports = _run(tmp_path, "spy.py", ["proto_forward_email"])
    (row,) = found
    _judged_and_failed(row)  # the driver lived on and judged
    report = reports["proto_forward_email"]
    seen = report["processes"]
    assert seen and all(p["memory"] is not True for p in seen), seen  # no memory it can read holds the oracle's reply
    assert not [p for p in seen if any(word in p["command"] for word in DRIVER_WORDS)], seen  # nothing to signal
    assert report["files"] == [] and report["workspace"] == [], report  # no scenario file, no oracle action


def test_gaia2_alone_asks_for_a_judges_sandbox():
    assert get("gaia2").judge_sandbox is True
    assert [b.name for b in registered() if b.judge_sandbox] == ["gaia2"]


def test_a_gaia2_scenario_without_its_judges_sandbox_is_never_served_from_the_agents():
    async def work() -> str:
        raise AssertionError("the agent's turns must not start")

    with pytest.raises(HarnessError, match="judge's sandbox"):
        asyncio.run(serving(Gaia2Env("/workspace/s.json", None), Environments(), work))
