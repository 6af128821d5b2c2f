"""The local docker-compose session (docker-compose.yml, Dockerfile, scripts/compose.sh) with
Debian's docker-compose 1.29 and the real engine: the file is valid, the service builds offline
and runs the smoke set with the results a host run gives, the rows land in a host directory owned
by the caller, and `harness cleanup` on the host reaps a killed containerised harness's sandboxes
but never a live one's.

Each test uses a compose project of its own and removes that project's containers; the image
(harness-compose:local) is shared and stays, so later builds hit the layer cache."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.sandbox.docker import cleanup, engine
from harness.sandbox.registry import get_provider
from tests.helpers.e2e import SMOKE_SUBSET, explain
from tests.helpers.locks import machine_lock
from tests.helpers.wait import steady

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[1]
USER = 4321  # not the caller's id: proves the rows belong to whoever HOST_UID names


def compose(project: str, *args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/compose.sh", "-p", project, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def sandboxes_of(prefix: str) -> list[dict]:
    """Harness containers (any state) of runs whose id starts with prefix."""
    return [c for c in engine.client().api.containers(all=True, filters={"label": "harness.managed=1"})
            if c["Labels"].get("harness.run_id", "").startswith(prefix)]


def project_containers(project: str) -> list[str]:
    return [c["Id"] for c in engine.client().api.containers(
        all=True, filters={"label": f"com.docker.compose.project={project}"})]


def host_cleanup() -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", "cleanup"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def project():
    """A unique compose project; its containers and the sandboxes of its runs are removed after."""
    name = f"hc{secrets.token_hex(4)}"
    yield name
    subprocess.run(["docker-compose", "-p", name, "down", "--remove-orphans"], cwd=REPO, capture_output=True,
                   timeout=120)
    for cid in project_containers(name):
        engine.remove_container(cid)
    provider = get_provider("docker")
    for run_id in {c["Labels"]["harness.run_id"] for c in sandboxes_of(name)}:
        provider.cleanup(run_id=run_id)


@pytest.fixture(scope="module")
def built():
    """The service's image, built through scripts/compose.sh (cold: minutes; warm: the layer cache)."""
    assert shutil.which("docker-compose"), "docker-compose is missing: scripts/setup.sh installs it"
    started = time.monotonic()
    with machine_lock("disk"):  # a cold build writes its layers (tests/helpers/locks.py)
        proc = compose(f"hcb{secrets.token_hex(3)}", "build")
    assert proc.returncode == 0, explain(proc)
    print(f"compose build: {time.monotonic() - started:.1f}s")
    return "harness-compose:local"


@pytest.fixture
def runs(tmp_path) -> Path:
    path = tmp_path / "runs"
    path.mkdir()
    os.chown(path, USER, USER)
    return path


def session_env(runs: Path) -> dict:
    return {"RUNS_DIR": str(runs), "HOST_UID": str(USER), "HOST_GID": str(USER)}


def run_args(out_name: str, *more: str) -> list[str]:
    return ["run", "--dataset", "datasets/gaia-smoke", "--model", "replay", "--website",
            "datasets/gaia-smoke/website", "--output-dir", f"runs/{out_name}", "--workers", "2", *more]


def test_compose_file_is_valid_for_docker_compose_1_29_and_follows_the_environment(tmp_path):
    text = (REPO / "docker-compose.yml").read_text()
    assert 'version: "3.8"' in text  # 1.29 reads a file without it as the old v1 format
    env = {**os.environ, "RUNS_DIR": str(tmp_path / "elsewhere"), "HOST_UID": "1234", "HOST_GID": "5678",
           "DOCKER_GID": "999", "HARNESS_BASE_IMAGE": "harness-base:abc"}
    proc = subprocess.run(["docker-compose", "config"], cwd=REPO, capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    # docker-compose itself runs on Debian's python3, which has PyYAML.
    parsed = json.loads(subprocess.run(
        ["/usr/bin/python3", "-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))"],
        input=proc.stdout, capture_output=True, text=True, check=True, timeout=60).stdout)
    service = parsed["services"]["harness"]
    assert service["network_mode"] == "host" and service["user"] == "1234:5678" and service["group_add"] == ["999"]
    assert service["build"]["args"]["BASE_IMAGE"] == "harness-base:abc"
    assert service["environment"]["HARNESS_BASE_IMAGE"] == "harness-base:abc"
    volumes = service["volumes"]
    assert "/var/run/docker.sock:/var/run/docker.sock:rw" in volumes
    assert f"{tmp_path / 'elsewhere'}:/work/runs:rw" in volumes and f"{REPO}/datasets:/work/datasets:ro" in volumes
    # Without the variables: the repository's runs/, the socket's default path.
    bare = {k: v for k, v in os.environ.items() if k not in ("RUNS_DIR", "HOST_UID", "HOST_GID", "DOCKER_GID")}
    default = subprocess.run(["docker-compose", "config"], cwd=REPO, capture_output=True, text=True, env=bare,
                             timeout=60)
    assert default.returncode == 0 and f"{REPO}/runs:/work/runs:rw" in default.stdout
    # The build context leaves the virtual environment, runs, datasets and the repository's history out.
    ignore = [line for line in (REPO / ".dockerignore").read_text().splitlines() if not line.startswith("#")]
    assert ignore[0] == "*" and "!harness" in ignore and not any(x.startswith("!.venv") for x in ignore)


def test_compose_session_runs_the_smoke_set_like_a_host_run(built, project, runs):
    out = f"c{secrets.token_hex(4)}"
    proc = compose(project, "run", "--rm", "harness", *run_args(out, "--ids", ",".join(SMOKE_SUBSET)),
                   env=session_env(runs), timeout=600)
    assert proc.returncode == 0, explain(proc)
    got = [json.loads(line) for line in (runs / out / "output.jsonl").read_text().splitlines()]
    assert {r["instance_id"]: r["correct"] for r in got} == SMOKE_SUBSET  # as tests/test_run_e2e.py's host run
    browsing = [r for r in got if "visit_url" in r["tool_calls"]]
    assert len(browsing) == 4 and all(r["correct"] for r in browsing)
    for row in browsing:  # the offline site through the sandbox's browser, driven from the container
        trace = [json.loads(x) for x in (runs / out / row["trace"]).read_text().splitlines()]
        web = [e for e in trace if e["type"] == "env" and e["env"] == "web"]
        assert web and all(e["outcome"] == "ok" for e in web), web
    report = json.loads((runs / out / "report.json").read_text())
    assert report["n_selected"] == 6 and report["n_correct"] == 5 and report["leaked_containers"] == 0
    # On the host, in the directory mounted as runs/, owned by HOST_UID:HOST_GID.
    for path in [runs / out, runs / out / "output.jsonl", runs / out / "report.json"]:
        assert (path.stat().st_uid, path.stat().st_gid) == (USER, USER), path
    assert sandboxes_of(out[:12] + "-") == []
    assert project_containers(project) == []  # --rm


def test_host_cleanup_spares_a_live_containerised_harness_and_reaps_a_killed_one(built, project, runs):
    out = f"k{secrets.token_hex(4)}"
    name = f"{project}-harness"
    child = subprocess.Popen(["bash", "scripts/compose.sh", "-p", project, "run", "--name", name, "harness",
                              *run_args(out)], cwd=REPO, env={**os.environ, **session_env(runs)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        prefix = out[:12] + "-"
        deadline = time.monotonic() + 180
        # Wait for the run's website and at least one sandbox; the website lives as long as the run.
        while time.monotonic() < deadline:
            mine = sandboxes_of(prefix)
            if any(c["Labels"].get("harness.instance_id") == "website" for c in mine) and len(mine) >= 2:
                break
            assert child.poll() is None, "the containerised run ended before it was seen running"
            time.sleep(0.1)
        else:
            pytest.fail("no sandbox of the containerised run appeared")
        owner_container = engine.client().api.inspect_container(name)["Id"]
        owners = {c["Labels"]["harness.owner"] for c in sandboxes_of(prefix)}
        assert all(o.startswith("ctr:") and o.split(":")[2] == owner_container for o in owners), owners

        # From the kill to our own reap we hold the engine's reap lock (harness/sandbox/docker/cleanup.py): every
        # other `harness run` on this engine (other workers' tests) reaps at its start and waits its turn, so the
        # orphans are still there for ours to remove and name. Our reap is the CLI run in this process, where
        # the lock is re-entrant.
        with machine_lock("reap"):
            live = host_cleanup()
            assert live.returncode == 0, live.stderr
            assert prefix not in live.stdout, live.stdout  # a live owner's containers are never touched
            website = [c for c in sandboxes_of(prefix) if c["Labels"].get("harness.instance_id") == "website"]
            assert website and website[0]["State"] == "running"
        with machine_lock("reap"), cleanup.reap_lock():
            subprocess.run(["docker", "kill", name], capture_output=True, timeout=60, check=True)
            child.wait(timeout=60)
            assert engine.container_state(owner_container).get("Running") is False  # exited, kept (no --rm)
            # Requests the harness had in flight (a create, a start) end in the engine without it.
            orphans = steady(lambda: sorted(c["Labels"].get("harness.name") or c["Names"][0].lstrip("/")
                                            for c in sandboxes_of(prefix)), 1.0, 60, "the killed run's containers")
            assert orphans, "killing the harness left nothing to reap"

            reaped = CliRunner().invoke(app, ["cleanup"])
            assert reaped.exit_code == 0, reaped.output
            assert sandboxes_of(prefix) == [], reaped.output
            assert all(f"removed {name} " in reaped.output for name in orphans), (orphans, reaped.output)
        networks = engine.client().api.networks(filters={"label": "harness.managed=1"})
        assert not [n for n in networks if n["Labels"].get("harness.run_id", "").startswith(prefix)]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
