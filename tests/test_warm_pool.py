"""--warm-pool: started sandboxes ahead of the instances, each used once, labelled and reaped like the rest."""

from __future__ import annotations

import json
import time

import pytest

from harness.runner.pool import WarmPool
from harness.sandbox.contract import SandboxSpec
from tests.helpers.e2e import explain, harness, rows
from tests.helpers.wait import holds_for, wait_for

pytestmark = pytest.mark.docker


def test_a_pooled_sandbox_is_handed_out_once_and_the_rest_are_removed(provider, image, run_id):
    spec = SandboxSpec(image=image, run_id=run_id, instance_id="warm")
    with WarmPool(provider, spec, 2) as pool:
        wait_for(lambda: pool.ready() >= 2, 60, "the pool to hold 2 started sandboxes")
        started = time.monotonic()
        first = pool.take()
        took = time.monotonic() - started
        assert first is not None and took < 0.05  # already started: no container start on this path
        assert first.shell("echo ready").stdout == "ready\n"
        second = pool.take()
        assert second is not None and second.name != first.name
        provider.teardown(first)
        provider.teardown(second)
        wait_for(lambda: pool.ready() >= 2, 60, "the pool to refill what was taken")
        assert len(provider.find(run_id)) == 2
        assert {f.name for f in provider.find(run_id)}.isdisjoint({first.name, second.name})  # never reused
    assert provider.find(run_id) == []  # close removed the ones not handed out
    assert pool.take() is None


def test_a_run_with_a_warm_pool(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"instance_id": f"i{n}", "question": "Say 1.", "answer": "1"}) + "\n"
                            for n in range(4)))
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"instance_id": f"i{n}", "turns": [
        {"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo 1"}}]},
        {"content": "<solution>1</solution>"}]}) + "\n" for n in range(4)))
    config = tmp_path / "config.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    out = tmp_path / "out"
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--workers", 1, "--warm-pool", 2)
    assert proc.returncode == 0, explain(proc)
    got = rows(out)
    assert len(got) == 4 and all(r["correct"] for r in got)
    names = [r["sandbox"] for r in got]
    assert len(set(names)) == 4  # one sandbox per instance
    assert sum("-warm-" in n for n in names) >= 2  # early ones may start cold while the pool fills
    assert json.loads((out / "report.json").read_text())["leaked_containers"] == 0


def test_the_pool_starts_no_more_sandboxes_than_instances_remain(provider, image, run_id):
    spec = SandboxSpec(image=image, run_id=run_id, instance_id="warm")
    with WarmPool(provider, spec, 2, total=3) as pool:
        pool.started_cold()  # one instance started its own: two more sandboxes at most
        taken = [wait_for(pool.take, 60, f"pooled sandbox {n + 1} of 2") for n in range(2)]
        # Room for a third, but no instance left to use it: none is started, watched for 2 s.
        holds_for(lambda: pool.ready() == 0 and len(provider.find(run_id)) == 2, 2, "no third sandbox",
                  every=0.2)
        for sandbox in taken:
            provider.teardown(sandbox)


def test_removals_run_as_wide_as_the_run(tmp_path):
    """The removal pool had 2 threads: slow removals queued behind each other and the run's end waited
    for the queue. Now every finished sandbox is removed at once, in parallel."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"instance_id": f"i{n}", "question": "Say 1.", "answer": "1"}) + "\n"
                            for n in range(6)))
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"instance_id": f"i{n}", "turns": [{"content": "<solution>1</solution>"}]})
                              + "\n" for n in range(6)))
    config = tmp_path / "config.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    marker = tmp_path / "most"
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", tmp_path / "out",
                   "--workers", 3, "--agent", "plain", "--sandbox", "tests.helpers.runners:SlowRemovalProvider",
                   env={"HARNESS_TEST_MARKER": str(marker)})
    assert proc.returncode == 0, explain(proc)
    assert len(rows(tmp_path / "out")) == 6
    assert int(marker.read_text()) >= 3  # more at once than the old pool of 2 allowed
