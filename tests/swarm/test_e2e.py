"""`harness run --sandbox swarm` end to end on the smoke dataset: the same answers and scores per
instance as `--sandbox docker`, and nothing of the run left (services, containers, volumes)."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import pytest

from harness.sandbox.docker import engine
from tests.helpers.e2e import containers_of, explain, harness, rows

pytestmark = pytest.mark.docker
SMOKE = Path(__file__).resolve().parents[2] / "datasets" / "gaia-smoke"
# What must match between providers, per instance.
SAME = ("instance_id", "status", "correct", "answer", "target", "error_kind", "steps")


def run_smoke(tmp_path: Path, sandbox: str, *flags) -> tuple[Path, list[dict]]:
    out = tmp_path / f"{sandbox[:2]}{secrets.token_hex(4)}"
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--output-dir", out, "--workers", 2,
                   "--sandbox", sandbox, *flags, timeout=900)
    assert proc.returncode == 0, explain(proc)
    return out, rows(out)


def leftovers(out: Path, wait: float = 20) -> dict[str, list[str]]:
    """Services, containers and volumes of runs into `out` still on the host engine (after up to `wait` s)."""
    prefix = out.name[:12] + "-"
    api = engine.client().api
    deadline = time.monotonic() + wait
    while True:
        services = [s["ID"] for s in api.services(filters={"label": "harness.managed=1"})
                    if s["Spec"]["Labels"].get("harness.run_id", "").startswith(prefix)]
        volumes = [v["Name"] for v in api.volumes(filters={"label": "harness.managed=1"}).get("Volumes") or []
                   if v["Labels"].get("harness.run_id", "").startswith(prefix)]
        left = {"services": services, "containers": containers_of(out), "volumes": volumes}
        if not any(left.values()) or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def by_instance(got: list[dict]) -> dict[str, tuple]:
    return {row["instance_id"]: tuple(row.get(key) for key in SAME) for row in got}


def compare(tmp_path: Path, *flags) -> list[dict]:
    _, docker_rows = run_smoke(tmp_path, "docker", *flags)
    out, swarm_rows = run_smoke(tmp_path, "swarm", *flags)
    assert by_instance(swarm_rows) == by_instance(docker_rows)
    assert sum(r["correct"] for r in swarm_rows) >= len(swarm_rows) // 2  # real work was done
    report = json.loads((out / "report.json").read_text())
    assert report["leaked_containers"] == 0
    assert leftovers(out) == {"services": [], "containers": [], "volumes": []}
    return swarm_rows


@pytest.mark.slow  # test_multinode's smoke run on a manager and a worker compares its rows with docker's (default)
def test_smoke_subset_on_swarm_matches_docker(swarm, tmp_path):
    got = compare(tmp_path, "--limit", 6)
    assert len(got) == 6


@pytest.mark.slow
def test_whole_smoke_set_on_swarm_matches_docker(swarm, tmp_path):
    got = compare(tmp_path)
    assert len(got) == 21
