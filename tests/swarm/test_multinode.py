"""The swarm provider on a real 2-node swarm: the host engine (manager) and a second dockerd in
its own network namespace (worker). Slow: the worker's engine starts (~5 s), and the first
session loads the sandbox image into it (~30 s)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.errors import InputError, SandboxDied
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker import engine
from harness.sandbox.registry import get_provider
from harness.sandbox.swarm import cluster, nodecheck, tasks
from tests.helpers.e2e import explain, harness, rows
from tests.swarm.test_e2e import SMOKE, by_instance, leftovers, run_smoke

pytestmark = [pytest.mark.docker]  # in the default suite: CI must show the 2-node swarm working
REPO = Path(__file__).resolve().parents[2]


def worker_leftovers(worker, out: Path, wait: float = 20) -> dict[str, list]:
    """Containers and volumes of runs into `out` on the worker's engine; containers after up to
    `wait` s (the worker removes a removed service's stopped container a few seconds later)."""
    prefix = out.name[:12] + "-"
    client = worker.client()
    deadline = time.monotonic() + wait
    try:
        api = client.api
        while True:
            containers = [c["Id"] for c in api.containers(all=True, filters={"label": "harness.managed=1"})
                          if c["Labels"].get("harness.run_id", "").startswith(prefix)]
            if not containers or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        volumes = [v for v in api.volumes(filters={"label": "harness.managed=1"}).get("Volumes") or []
                   if v["Labels"].get("harness.run_id", "").startswith(prefix)]
        return {"containers": containers, "volumes": volumes}
    finally:
        client.close()


def prune_worker_volumes(worker, out: Path) -> int:
    """The swarm executor's unused copies of task volumes (swarm/volumes.py): the documented recipe."""
    left = worker_leftovers(worker, out)["volumes"]
    for volume in left:
        worker.docker("volume", "rm", volume["Name"])
    return len(left)


class NodeWatch(threading.Thread):
    """Records the node of every task of runs into `out` while they run."""

    def __init__(self, out: Path):
        super().__init__(daemon=True)
        self.prefix, self.nodes, self.stop = out.name[:12] + "-", {}, threading.Event()

    def run(self):
        api = engine.client().api
        while not self.stop.is_set():
            try:
                for service in api.services(filters={"label": "harness.managed=1"}):
                    if service["Spec"]["Labels"].get("harness.run_id", "").startswith(self.prefix):
                        for task in api.tasks(filters={"service": service["ID"]}):
                            if task.get("NodeID") and task["Status"]["State"] == "running":
                                self.nodes[service["Spec"]["Name"]] = task["NodeID"]
            except Exception:  # noqa: BLE001 - a service removed between calls
                pass
            time.sleep(0.2)


def outcomes(got: list[dict]) -> dict[str, tuple]:
    """What must not depend on where an instance ran: its status, answer and verdict (not `steps`,
    which counts the model calls of every attempt, the one a drain cut short included)."""
    return {r["instance_id"]: (r["status"], r["answer"], r["correct"], r["error_kind"]) for r in got}


def slow_dataset(tmp_path: Path, n: int = 8) -> list[str]:
    """Instances whose agents work ~4 s in their sandbox (a replayed `sleep`), so a drain or a stop
    finds some of them running on the worker; returns the `harness run` arguments for it."""
    data, replay, config = tmp_path / "slow.jsonl", tmp_path / "slow-replay.jsonl", tmp_path / "slow.toml"
    data.write_text("".join(json.dumps({"instance_id": f"slow-{i}", "question": "Wait, then say ok.",
                                        "answer": "ok"}) + "\n" for i in range(n)))
    turns = [{"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 4; echo ok"}}]},
             {"content": "<solution>ok</solution>"}]
    replay.write_text("".join(json.dumps({"instance_id": f"slow-{i}", "turns": turns}) + "\n" for i in range(n)))
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    return ["--dataset", str(data), "--model", "rec", "--config", str(config)]


def test_preflight_checks_both_nodes_and_names_one_without_the_image(two_nodes):
    ids, worker = two_nodes
    provider = get_provider("swarm")
    image = provider.preflight(log=lambda m: None)
    spent = nodecheck.check_nodes(image, "none", timeout=60)
    assert spent < 10
    # An image only the manager has: the worker is named, with the reason.
    engine.client().api.tag(image, "harness-sandbox", "manager-only")
    try:
        with pytest.raises(InputError) as err:
            nodecheck.check_nodes("harness-sandbox:manager-only", "none", timeout=60)
        worker_name = cluster.node_name(cluster.node(ids["worker"]))
        manager_name = cluster.node_name(cluster.node(ids["manager"]))
        assert "1 of 2 node(s)" in str(err.value) and f"{worker_name}: task rejected" in str(err.value)
        assert "No such image" in str(err.value)
        assert worker_name == manager_name or f"{manager_name}: task" not in str(err.value)
    finally:
        engine.client().api.remove_image("harness-sandbox:manager-only")


def test_a_sandbox_on_the_worker_answers_at_the_workers_address(two_nodes):
    ids, worker = two_nodes
    provider = get_provider("swarm")
    image = provider.preflight(log=lambda m: None)
    run_id = f"mn-{secrets.token_hex(4)}"
    try:
        started = []
        for i in range(4):  # 1 CPU each, 2 CPUs per node: two land on each node
            t0 = time.monotonic()
            started.append(provider.start(SandboxSpec(image=image, run_id=run_id, instance_id=f"s{i}")))
            started[-1].start_s = time.monotonic() - t0
        by_node = {}
        for sb in started:
            by_node.setdefault(tasks.current(sb.id)["NodeID"], []).append(sb)
        assert set(by_node) == {ids["manager"], ids["worker"]}
        for sb in by_node[ids["worker"]]:
            assert sb.handle().host == worker.addr
            assert sb.shell("hostname -I").exit_code == 0 and sb.shell("echo w").stdout == "w\n"
        for sb in by_node[ids["manager"]]:
            assert sb.handle().host == worker.host_addr
        for sb in started:
            provider.teardown(sb)
        with pytest.raises(SandboxDied):  # the contract's answer for a sandbox torn down (conformance suite)
            by_node[ids["worker"]][0].shell("true")
    finally:
        provider.cleanup(run_id=run_id)
    assert provider.find(run_id) == []


def test_smoke_set_lands_on_both_nodes_with_the_docker_providers_results(two_nodes, tmp_path):
    ids, worker = two_nodes
    _, docker_rows = run_smoke(tmp_path, "docker", "--limit", 8)
    out = tmp_path / f"sw{secrets.token_hex(4)}"
    watch = NodeWatch(out)
    watch.start()
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--output-dir", out, "--workers", 4,
                   "--sandbox", "swarm", "--limit", 8, timeout=900)
    watch.stop.set()
    watch.join()
    assert proc.returncode == 0, explain(proc)
    assert set(watch.nodes.values()) == {ids["manager"], ids["worker"]}, watch.nodes
    assert by_instance(rows(out)) == by_instance(docker_rows)
    assert leftovers(out) == {"services": [], "containers": [], "volumes": []}
    assert worker_leftovers(worker, out)["containers"] == []
    # Only the executor's unused volume copies stay on the worker: 3 per sandbox it ran.
    on_worker = sum(1 for node in watch.nodes.values() if node == ids["worker"])
    pruned = prune_worker_volumes(worker, out)
    assert pruned % 3 == 0 and pruned >= 3 * on_worker  # the watch may miss a short-lived sandbox


def run_disrupted(ids: dict, tmp_path: Path, disrupt) -> tuple[list[dict], Path]:
    """The slow dataset on swarm with 4 workers, calling `disrupt()` once a sandbox of the run is running on the
    worker; returns (its rows, its dir). Each instance must end as the docker provider ends it: ok, answer `ok`,
    correct (as test_smoke_set_lands_on_both_nodes_with_the_docker_providers_results compares a docker run)."""
    dataset = slow_dataset(tmp_path)
    out = tmp_path / f"ds{secrets.token_hex(4)}"
    watch = NodeWatch(out)
    watch.start()
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", *dataset,
                             "--output-dir", str(out), "--workers", "4", "--sandbox", "swarm"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HARNESS_RETRY_BACKOFF": "0"})
    try:
        deadline = time.monotonic() + 120
        while ids["worker"] not in watch.nodes.values():  # a sandbox of the run is running on the worker
            assert time.monotonic() < deadline and proc.poll() is None, "nothing ran on the worker"
            time.sleep(0.2)
        disrupt()
        _, stderr = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        watch.stop.set()
        watch.join()
    assert proc.returncode == 0, stderr[-3000:]
    got = rows(out)
    assert sorted(r["instance_id"] for r in got) == [f"slow-{i}" for i in range(8)]  # each exactly once
    assert outcomes(got) == {f"slow-{i}": ("ok", "ok", True, None) for i in range(8)}
    assert any(r["attempt"] > 1 for r in got), "the disruption should have cost some instance an attempt"
    assert leftovers(out) == {"services": [], "containers": [], "volumes": []}
    return got, out


@pytest.mark.slow  # the same promise as test_stopping_the_worker_mid_run_loses_no_instance (default), by a drain
def test_draining_the_worker_mid_run_loses_no_instance(two_nodes, tmp_path):
    ids, worker = two_nodes

    def drain():
        subprocess.run(["docker", "node", "update", "--availability", "drain", ids["worker"]], check=True,
                       capture_output=True, timeout=60)

    try:
        _, out = run_disrupted(ids, tmp_path, drain)
    finally:
        subprocess.run(["docker", "node", "update", "--availability", "active", ids["worker"]],
                       capture_output=True, timeout=60)
    assert worker_leftovers(worker, out)["containers"] == []
    prune_worker_volumes(worker, out)


def test_stopping_the_worker_mid_run_loses_no_instance(two_nodes, tmp_path):
    """Last in the module: the worker's dockerd is stopped for good (its sandboxes stop answering);
    the manager marks the node down, its tasks' sandboxes are SandboxDied, retried on the manager."""
    ids, worker = two_nodes

    def stop():
        # Only the engine (SIGTERM: it stops its containers and its containerd, then exits); its
        # network stays (the veth's host end is the manager's address).
        worker.proc.send_signal(signal.SIGTERM)
        worker.proc.wait(timeout=60)

    run_disrupted(ids, tmp_path, stop)
