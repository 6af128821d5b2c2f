"""A Harbor verdict the agent cannot touch (issue 38 item 1): before the verifier runs, no process of the agent's is
left in the sandbox (sandboxd ends every process but itself), and /logs/verifier, /tests and the folder the tests
are staged in are made afresh, so nothing the agent planted is read as the verifier's.

A hostile agent (`--agent sandbox:bash @hostile.sh`, real containers, the task's own image) answers wrong and:
- leaves a `setsid` loop writing {"reward": 1} to /logs/verifier/reward.json: the verifier writes 0 to reward.txt,
  and reward.json is read first;
- plants a `json.py` in the folder the verifier's tests are staged in, which the task's test (a Python script in
  /tests, whose folder comes first on its sys.path) would import instead of the standard library's."""

from __future__ import annotations

import json

import pytest

from tests.helpers.e2e import explain, harness, rows
from tests.test_harbor import TEST_SH, app_dockerfile, python_task_base, write_task

HOSTILE = r"""#!/bin/bash
echo goodbye > /app/answer.txt
if grep -q shadow "$HARNESS_TASK_FILE"; then
  mkdir -p /tmp/harness-harbor/tests /tests
  printf 'import sys\nopen("/logs/verifier/reward.txt", "w").write("1")\nsys.exit(0)\n' \
    > /tmp/harness-harbor/tests/json.py
  cp /tmp/harness-harbor/tests/json.py /tests/json.py
else
  setsid bash -c 'touch /tmp/loop-started; while :; do mkdir -p /logs/verifier; \
    echo "{\"reward\": 1}" > /logs/verifier/reward.json; sleep 0.02; done' </dev/null >/dev/null 2>&1 &
  until [ -e /tmp/loop-started ]; do sleep 0.01; done  # in a session of its own before this one ends
fi
echo '<solution>done</solution>'
"""
CHECK_PY = """import json
import pathlib

answer = pathlib.Path("/app/answer.txt")
ok = answer.is_file() and answer.read_text().strip() == "hello"
pathlib.Path("/logs/verifier/reward.txt").write_text(json.dumps(int(ok)))
"""


@pytest.fixture(scope="module")
def python_base(provider, image):
    with python_task_base() as made:
        yield made


@pytest.mark.docker
def test_a_hostile_agent_cannot_plant_its_own_reward(tmp_path, out, python_base):
    py, _, made = python_base
    tasks = tmp_path / "tasks"
    slow = TEST_SH.replace("#!/bin/bash\n", "#!/bin/bash\nsleep 1  # as a real verifier takes its time (pytest)\n")
    made.append(write_task(tasks, "planted", app_dockerfile(py), test_sh=slow) / "environment")
    shadowed = write_task(tasks, "shadowed", app_dockerfile(py), test_sh="#!/bin/bash\nmkdir -p /logs/verifier\n"
                          "python3 /tests/check.py\n", instruction="Write hello into /app/answer.txt (shadow).")
    (shadowed / "tests" / "check.py").write_text(CHECK_PY)
    made.append(shadowed / "environment")
    (tasks / "replay.jsonl").write_text("".join(json.dumps({"instance_id": n, "turns": []}) + "\n"
                                                for n in ("planted", "shadowed")))
    (tmp_path / "hostile.sh").write_text(HOSTILE)
    run = harness("run", "--dataset", f"harbor:{tasks}", "--agent", f"sandbox:bash @{tmp_path / 'hostile.sh'}",
                  "--model", "replay", "--scorer", "harbor", "--output-dir", out)
    assert run.returncode == 0, explain(run)
    got = {r["instance_id"]: r for r in rows(out)}
    assert sorted(got) == ["planted", "shadowed"], got
    forged = {name: row["verdicts"].get("harbor") for name, row in got.items()
              if row["status"] != "ok" or row["correct"] is not False or row["verdicts"]["harbor"]["reward"] != 0}
    assert forged == {}, forged
    assert got["planted"]["verdicts"]["harbor"]["source"] == "reward.txt"  # no reward.json: the loop is gone


@pytest.mark.docker
def test_end_processes_leaves_nothing_but_the_service(provider, run_id, image):
    """Daemons in sessions of their own, a process that ignores SIGTERM and one that keeps forking: all ended, the
    service still answers, and nothing of them is alive after (zombies reaped or dead)."""
    from harness.sandbox.contract import SandboxSpec

    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="end")) as sandbox:
        quiet = "</dev/null >/dev/null 2>&1 &"
        started = sandbox.shell(f"setsid sleep 1000 {quiet} "
                                f"setsid bash -c 'trap \"\" TERM; while :; do sleep 0.05; done' {quiet} "
                                f"setsid bash -c 'while :; do (sleep 5 &); sleep 0.01; done' {quiet} "
                                "sleep 0.5; echo ok")
        assert started.ok, started
        assert sandbox.end_processes() == 0
        # What is left: zombies (dead; sandboxd, their init, reaps them) and this command's own processes.
        left = sandbox.shell("ps -eo pid=,stat=,comm= | awk '$1 != 1 && $2 !~ /^Z/ && $3 !~ /^(ps|awk|bash)$/'")
        assert left.ok and left.stdout.strip() == "", left
        assert sandbox.shell("echo still here").stdout == "still here\n"


# ---------------------------------------------------------------- a task's build has a deadline (issue 38 item 4)


@pytest.mark.docker
def test_a_build_that_never_ends_is_stopped_at_its_build_timeout(tmp_path, out, python_base):
    """A task whose Dockerfile never finishes a step: the run ends at its build_timeout_sec (exit 2, naming the task and
    the field), the engine's build is cancelled (no container of it left running) and the image lock is free after."""
    import time

    from filelock import FileLock

    from harness.sandbox.docker import images
    from tests.helpers.wait import wait_for

    marker = f"harness-test-endless-{time.monotonic_ns()}"
    tasks = tmp_path / "tasks"
    toml = "[environment]\nbuild_timeout_sec = 8.0\n"
    folder = write_task(tasks, "endless", app_dockerfile(python_base[0], f"RUN sleep 3600 # {marker}\n"), toml=toml)
    python_base[2].append(folder / "environment")
    (tasks / "replay.jsonl").write_text(json.dumps({"instance_id": "endless", "turns": []}) + "\n")
    started = time.monotonic()
    run = harness("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--model", "replay", "--scorer",
                  "harbor", "--output-dir", out, timeout=300)
    spent = time.monotonic() - started
    assert run.returncode == 2, explain(run)
    assert f"task {folder.resolve()}: its image did not build within its build_timeout_sec (8 s;" in run.stderr, \
        explain(run)
    assert spent < 120, spent

    def building() -> list[str]:
        import subprocess

        listed = subprocess.run(["docker", "ps", "--no-trunc", "--format", "{{.ID}} {{.Command}}"],
                                capture_output=True, text=True, timeout=60)
        return [line for line in listed.stdout.splitlines() if marker in line]

    wait_for(lambda: not building(), 60, "the cancelled build's container to go")
    lock = FileLock(str(images.lock_path()), timeout=60)
    lock.acquire()  # free again (another test's build may hold it a while: never forever)
    lock.release()


@pytest.mark.docker
def test_a_task_build_waits_for_the_image_lock_no_longer_than_its_bound(tmp_path, python_base, monkeypatch):
    """Another process holding the engine's image lock (a build that hangs elsewhere) makes a task's build give up
    (at LOCK_WAIT_S, or its build_timeout_sec when longer), saying so, instead of waiting forever."""
    import multiprocessing
    import time

    from harness.errors import InfraError
    from harness.sandbox.docker import images, task_images

    context = write_task(tmp_path, "waits", app_dockerfile(python_base[0], "# waits\n")) / "environment"
    python_base[2].append(context)
    spawn = multiprocessing.get_context("spawn")
    held, release = spawn.Event(), spawn.Event()
    holder = spawn.Process(target=_hold_lock, args=(str(images.lock_path()), held, release))
    monkeypatch.setattr(task_images, "LOCK_WAIT_S", 1.0)
    holder.start()
    try:
        assert held.wait(600)  # another test's build may hold it first
        started = time.monotonic()
        with pytest.raises(InfraError, match="image lock .* held by another build for longer than 3 s: is a build"):
            task_images.build_task(context, log=lambda m: None, build_timeout=3.0)
        assert time.monotonic() - started < 30
    finally:
        release.set()
        holder.join(60)


def _hold_lock(path: str, held, release) -> None:
    from filelock import FileLock

    with FileLock(path):
        held.set()
        release.wait(300)
