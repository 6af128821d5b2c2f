"""Faults the harness already survived before issue 9, kept honest here with figures.

Each test drives the real CLI on real sandboxes with a replay model, provokes one fault,
and checks the run's two promises: every selected instance ends as exactly one row
(nothing lost), and no container of the run is left (nothing leaked).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import (
    REPO,
    containers_of,
    explain,
    fake_config,
    harness,
    out_dir,
    replay_dataset,
    rows,
    start,
    trace,
)

pytestmark = pytest.mark.docker


def _dataset(folder: Path, count: int, turns_for) -> tuple[Path, Path]:
    """`count` instances q0..q{count-1} (answer: the index) and a replay config playing turns_for(i)."""
    return replay_dataset(folder, [(f"q{i}", f"What is {i}?", str(i)) for i in range(count)],
                          lambda iid: turns_for(int(iid[1:])))


def _start(*args, sigint_ignored: bool = False) -> subprocess.Popen:
    return start(*args, stdout=subprocess.DEVNULL, sigint_ignored=sigint_ignored)


def _one_row_each(out: Path, count: int) -> int:
    """How many of the selected instances do NOT have exactly one row (the results lost)."""
    ids = [r["instance_id"] for r in rows(out)] if (out / "output.jsonl").exists() else []
    return sum(ids.count(f"q{i}") != 1 for i in range(count))


def _kill_runs(out: Path, tmp_path: Path, data: Path, config: Path, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(kills):
        proc = _start("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                      "--workers", 4)
        time.sleep(rng.uniform(1.0, 6.0))
        proc.send_signal(signal.SIGKILL)  # the harness alone: its agents die with it (PDEATHSIG)
        proc.wait(timeout=30)


def _sleepy(i: int) -> list[dict]:
    """An agent that runs one short command, then answers: slow enough to be killed mid-flight."""
    return [{"tool_calls": [{"name": "run_shell", "arguments": {"command": f"sleep 0.{i % 7 + 2}; echo {i}"}}]},
            {"content": f"<solution>{i}</solution>"}]


def _kill9_then_resume(tmp_path, reliability, count: int, kills: int, fault: str) -> None:
    data, config = _dataset(tmp_path / "data", count, _sleepy)
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    _kill_runs(out, tmp_path, data, config, kills, seed=count)
    final = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                    "--workers", 4, timeout=600)
    lost, leaked = _one_row_each(out, count), len(containers_of(out))
    reliability.record(fault, "every instance finished once after resume" if not lost else "rows lost",
                       lost=lost, leaked=leaked, started=t0)
    assert final.returncode == 0, explain(final)
    assert lost == 0 and leaked == 0
    assert all(r["status"] == "ok" and r["correct"] for r in rows(out))


def test_kill9_once_then_resume(tmp_path, image, reliability):
    _kill9_then_resume(tmp_path, reliability, count=8, kills=1, fault="kill -9 of the harness, once, 8 instances")


@pytest.mark.slow
def test_kill9_five_times_on_thirty_instances_then_resume(tmp_path, image, reliability):
    _kill9_then_resume(tmp_path, reliability, count=30, kills=5,
                       fault="kill -9 of the harness at random points, 5 times, 30 instances")


@pytest.mark.parametrize("ignored", [False, True], ids=["sigint", "sigint-ignored-at-start"])
def test_sigint_removes_the_runs_sandboxes_within_15s(tmp_path, image, reliability, ignored):
    """Also when the harness was started with SIGINT ignored (a script's `harness run &`; a fresh-clone
    suite run launched so): before, Python left it ignored and the run went on to its end, 4 x 120 s."""
    long = lambda i: [{"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 120"}}]},  # noqa: E731
                      {"content": "<solution>0</solution>"}]
    data, config = _dataset(tmp_path / "data", 4, long)
    out = out_dir(tmp_path)
    args = ("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out, "--workers", 2)
    proc = _start(*args, sigint_ignored=ignored)
    deadline = time.monotonic() + 60
    while len(containers_of(out)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert containers_of(out), "no sandbox started"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:  # read stderr meanwhile (a full pipe would hold the run's exit), and show it when the run does not end
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        pytest.fail(f"the run did not end within 60 s of its SIGINT (once under a load average of 80); stderr:\n"
                    f"{err[-5000:]}")
    while containers_of(out) and time.monotonic() - t0 < 15:
        time.sleep(0.2)
    leaked = len(containers_of(out))
    reliability.record("SIGINT (Ctrl-C) mid-run" + (", SIGINT ignored at start" if ignored else ""),
                       f"exit {proc.returncode}, sandboxes removed", leaked=leaked, started=t0)
    assert leaked == 0
    assert proc.returncode != 0


@pytest.mark.parametrize("fault, command, expect", [
    # The bomb fills the pids limit, and the command outlives its timeout: only the timeout kill ends
    # it, and the next command must start (the kill answers once the bomb's pids are free again).
    ("fork bomb in the sandbox", ":(){ :|:& };: ; sleep 60", ("timed out",)),
    ("endless output", "yes hello", ("output truncated",)),
    pytest.param("sleep forever", "sleep infinity", ("timed out",), marks=pytest.mark.slow),  # timeouts: elsewhere
])
def test_hostile_commands_end_and_the_instance_still_answers(tmp_path, image, reliability, fault, command, expect):
    turns = [{"tool_calls": [{"name": "run_shell", "arguments": {"command": command}}]},
             {"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo still-alive"}}]},
             {"content": "<solution>0</solution>"}]
    data, config = _dataset(tmp_path / "data", 1, lambda i: turns)
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--command-timeout", 5, "--instance-timeout", 120)
    (row,) = rows(out)
    results = [e for e in trace(out, row) if e["type"] == "tool_result"]
    leaked = len(containers_of(out))
    reliability.record(fault, f"command ended ({' or '.join(expect)}); row {row['status']}", lost=0 if row else 1,
                       leaked=leaked, started=t0)
    assert proc.returncode == 0, explain(proc)
    assert row["status"] == "ok" and row["correct"] is True, row
    assert any(e in results[0]["content"] for e in expect), results[0]["content"][-500:]
    assert "still-alive" in results[1]["content"]  # the sandbox's service survived the first command
    assert row["attempt"] == 1 and row["env_outcomes"]["code"].get("error", 0) == 0, row
    assert leaked == 0


def test_model_key_never_visible_in_the_sandbox(tmp_path, image, reliability):
    """Secret canary: the model's API key goes to the model server, never into a sandbox."""
    canary = "sk-canary-" + os.urandom(8).hex()
    look = ("env; cat /proc/1/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n'; "
            "grep -rsl " + canary[:14] + " /workspace /tmp /proc/*/environ 2>/dev/null; echo done")
    script = [tool_calls(("run_shell", {"command": look})), text("<solution>0</solution>")]
    data, _ = _dataset(tmp_path / "data", 1, lambda i: [])
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    with FakeOpenAI(script) as server:
        config = fake_config(tmp_path / "fake.toml", server.base_url)
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", "plain", env={"FAKE_OPENAI_KEY": canary})
        seen_by_server = [r["headers"].get("authorization", "") for r in server.chat_requests]
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    shown = "\n".join(e["content"] for e in trace(out, row) if e["type"] == "tool_result")
    leaked = canary in shown or canary in (out / row["trace"]).read_text()
    reliability.record("secret canary (model key) looked for inside the sandbox",
                       "not visible" if not leaked else "VISIBLE", leaked=len(containers_of(out)), started=t0)
    assert "done" in shown  # the probe really ran in the sandbox
    assert not leaked
    assert any(canary in h for h in seen_by_server)  # the key did reach the model server


def _our_dockerd() -> int | None:
    """The PID of the local dockerd, when scripts/ensure-docker.sh started it (the only engine a test may restart)."""
    pid_file = REPO / ".docker-engine.pid"
    if os.environ.get("DOCKER_HOST") or not pid_file.exists():
        return None
    pid = int(pid_file.read_text().strip() or 0)
    try:
        return pid if Path(f"/proc/{pid}/comm").read_text().strip() == "dockerd" else None
    except OSError:
        return None


@pytest.mark.slow
def test_engine_restarted_mid_run(tmp_path, image, reliability):
    """dockerd stops and starts again while instances run: the run completes, the lost instances are
    infra errors (retried in the run when the engine is back in time, else on resume), nothing leaks."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        pytest.skip("restarts the engine under every other worker's tests: run it alone (-n 0)")
    pid = _our_dockerd()
    if pid is None:
        pytest.skip("the engine was not started by scripts/ensure-docker.sh: not ours to restart")
    data, config = _dataset(tmp_path / "data", 6, lambda i: [
        {"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 4"}}]},
        {"content": f"<solution>{i}</solution>"}])
    out = out_dir(tmp_path)
    proc = _start("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                  "--workers", 2, "--max-retries", 3)
    deadline = time.monotonic() + 60
    while not containers_of(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)  # ours (see _our_dockerd); it stops its containers on the way out
    while Path(f"/proc/{pid}").exists() and time.monotonic() - t0 < 60:
        time.sleep(0.2)
    subprocess.run(["bash", str(REPO / "scripts" / "ensure-docker.sh")], check=True, timeout=120)
    _, stderr = proc.communicate(timeout=600)
    resumed = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                      "--workers", 2, timeout=600)
    final = {r["instance_id"]: r for r in rows(out)}
    lost, leaked = sum(f"q{i}" not in final for i in range(6)), len(containers_of(out))
    first_kinds = sorted({r["error_kind"] for r in rows(out) if r["status"] == "error"}, key=str)
    reliability.record("the engine restarted mid-run",
                       f"run ended (exit {proc.returncode}), errors {first_kinds or 'none'}, resume finished the rest",
                       lost=lost, leaked=leaked, started=t0)
    assert "Traceback" not in stderr, stderr[-3000:]
    assert proc.returncode in (0, 3), stderr[-3000:]  # completed: ok, or instances left as infra errors
    assert set(first_kinds) <= {"infra"}
    assert resumed.returncode == 0, explain(resumed)
    assert lost == 0 and leaked == 0
    assert all(r["status"] == "ok" for r in final.values())


def test_a_sandbox_killed_by_the_engine_is_retried_on_a_fresh_one(tmp_path, image, reliability):
    data, config = _dataset(tmp_path / "data", 1, lambda i: [
        {"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo 0"}}]},
        {"content": "<solution>0</solution>"}])
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--agent", "tests.helpers.agents:kills_its_first_sandbox", "--max-retries", 1,
                   env={"HARNESS_TEST_MARKER": str(tmp_path / "marker")})
    (row,) = rows(out)
    leaked = len(containers_of(out))
    reliability.record("sandbox killed by the engine while the agent starts",
                       f"infra, retried: attempt {row['attempt']} {row['status']}", leaked=leaked, started=t0)
    assert proc.returncode == 0, explain(proc)
    assert row["attempt"] == 2 and row["status"] == "ok" and row["correct"] is True
    assert leaked == 0


@pytest.mark.parametrize("fault, content", [
    ("malformed dataset: duplicate ids",
     '{"instance_id": "a", "question": "q"}\n{"instance_id": "a", "question": "q"}\n'),
    ("malformed dataset: a torn JSON line", '{"instance_id": "a", "question": "q"}\n{not json\n'),
    ("malformed dataset: a file outside the dataset", '{"instance_id": "a", "question": "q", "files": ["../x"]}\n'),
])
def test_malformed_input_exits_2_before_any_container(tmp_path, reliability, fault, content):
    data = tmp_path / "bad.jsonl"
    data.write_text(content)
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    proc = harness("run", "--dataset", data, "--model", "replay", "--output-dir", out)
    reliability.record(fault, f"exit {proc.returncode} before any container", leaked=len(containers_of(out)),
                       started=t0)
    assert proc.returncode == 2, explain(proc)
    assert not out.exists() and containers_of(out) == []

