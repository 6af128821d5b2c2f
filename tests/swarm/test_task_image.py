"""A task's own image on a real 2-node swarm (the host engine as manager, a second dockerd as worker): a Harbor task
with a small Dockerfile on the harness's offline base. Its image is built on the manager; while the worker lacks
it, `harness run --sandbox swarm` is refused (exit 2, before any instance) naming the worker, the image and how
to load it; once the test loads it into the worker's engine the oracle passes there (the manager drained, so the
sandbox can run on the worker only). The gaia2 image goes the same way; it is not loaded here (2.65 GB)."""

from __future__ import annotations

import secrets
import subprocess

import pytest

from harness.sandbox.docker.task_images import task_tag
from harness.sandbox.swarm import cluster
from tests.helpers.e2e import explain, harness, rows
from tests.swarm.test_e2e import leftovers
from tests.swarm.test_multinode import NodeWatch, prune_worker_volumes, worker_leftovers
from tests.test_harbor import app_dockerfile, no_turns, python_task_base, write_task

pytestmark = [pytest.mark.docker]


def availability(node_id: str, value: str) -> None:
    subprocess.run(["docker", "node", "update", "--availability", value, node_id], check=True, capture_output=True,
                   timeout=60)


def test_a_tasks_own_image_is_refused_until_the_worker_has_it_then_the_oracle_passes_there(two_nodes, tmp_path):
    ids, worker = two_nodes
    with python_task_base() as (py, _, made):
        tasks = tmp_path / "tasks"
        context = write_task(tasks, "hello", app_dockerfile(py, f"RUN echo {secrets.token_hex(4)} > /mark\n"))
        made.append(context / "environment")
        no_turns(tasks, "hello")
        tag = task_tag((context / "environment").resolve())
        run = ("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--model", "replay", "--scorer", "harbor",
               "--sandbox", "swarm")

        refused_out = tmp_path / f"tr{secrets.token_hex(4)}"
        proc = harness(*run, "--output-dir", refused_out, timeout=900)
        worker_name = cluster.node_name(cluster.node(ids["worker"]))
        manager_name = cluster.node_name(cluster.node(ids["manager"]))
        assert proc.returncode == 2, explain(proc)
        assert f"1 of 2 node(s) cannot run sandboxes of {tag}" in proc.stderr, explain(proc)
        assert f"{worker_name}: task rejected" in proc.stderr and "No such image" in proc.stderr, explain(proc)
        assert f"docker save {tag} | docker -H NODE load" in proc.stderr, explain(proc)
        assert worker_name == manager_name or f"{manager_name}: task" not in proc.stderr
        assert not (refused_out / "output.jsonl").exists()  # before any instance
        assert leftovers(refused_out) == {"services": [], "containers": [], "volumes": []}

        worker.load_image(tag)  # what the message says to do
        try:
            out = tmp_path / f"tp{secrets.token_hex(4)}"
            watch = NodeWatch(out)
            watch.start()
            availability(ids["manager"], "drain")  # the sandbox can run on the worker only
            try:
                proc = harness(*run, "--output-dir", out, timeout=900)
            finally:
                availability(ids["manager"], "active")
                watch.stop.set()
                watch.join()
            assert proc.returncode == 0, explain(proc)
            got = rows(out)
            assert [(r["instance_id"], r["correct"]) for r in got] == [("hello", True)], got
            assert got[0]["verdicts"]["harbor"]["source"] == "reward.txt"
            assert set(watch.nodes.values()) <= {ids["worker"]}, watch.nodes  # it may miss a short sandbox
            assert leftovers(out) == {"services": [], "containers": [], "volumes": []}
            assert worker_leftovers(worker, out)["containers"] == []
            # It ran on the worker, with the task's own writable places: the swarm executor's unused copies of its
            # volumes stay there (swarm/volumes.py), one per place: /app, /tmp, /workspace, /logs, /tests, /solution.
            assert got[0]["attempt"] == 1 and prune_worker_volumes(worker, out) == 6
        finally:
            worker.docker("rmi", tag, check=False)
