"""Agent code that keeps its own sandbox too busy (issue 18 item 6): the agent's, never infra.

A foreground Python fork bomb, or 900 busy background processes, once starved sandboxd until
its reply missed the client's read timeout, and the instance was recorded as `infra` and
retried on fresh sandboxes three times. Each test here drives the real CLI on a real sandbox
with a replay model and checks that the instance ends on its first sandbox, as the agent's
own outcome (its command timed out, or it ran), and that a command that cannot start is an
`error` environment outcome, not `ok`.
"""

from __future__ import annotations

import time

import pytest

from harness.errors import SandboxDied
from harness.sandbox import service
from harness.sandbox.contract import SandboxSpec
from tests.helpers.e2e import containers_of, explain, harness, out_dir, replay_dataset, rows, trace

pytestmark = pytest.mark.docker

PYTHON_FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""

# 900 children that wait for the parent to let them go (else each new fork competes with all
# those already spinning), then spin for ever; the command itself ends at once.
BUSY_900 = """
import os
r, w = os.pipe()
for _ in range(900):
    if os.fork() == 0:
        os.close(w)
        os.read(r, 1)
        while True:
            pass
os.close(w)
print("spawned")
"""


def _run(tmp_path, turns, *args):
    """(the CLI's process, the one row, its tool results, containers left) of a one-instance run."""
    data, config = replay_dataset(tmp_path / "data", [("q0", "What is 0?", "0")], lambda iid: turns)
    out = out_dir(tmp_path)
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--instance-timeout", 240, *args, timeout=600)
    (row,) = rows(out)
    results = [e["content"] for e in trace(out, row) if e["type"] == "tool_result"]
    return proc, row, results, len(containers_of(out))


def _python(code: str) -> dict:
    return {"tool_calls": [{"name": "run_python", "arguments": {"code": code}}]}


def _shell(command: str) -> dict:
    return {"tool_calls": [{"name": "run_shell", "arguments": {"command": command}}]}


def test_a_foreground_python_fork_bomb_is_the_agents_timeout_not_infra(tmp_path, image, reliability):
    t0 = time.monotonic()
    proc, row, results, leaked = _run(tmp_path, [_python(PYTHON_FORK_BOMB), _shell("echo still-alive"),
                                                 {"content": "<solution>0</solution>"}], "--command-timeout", 5)
    reliability.record("foreground Python fork bomb (command timeout 5 s)",
                       f"attempt {row['attempt']}, row {row['status']}, env {row['env_outcomes']}", leaked=leaked,
                       started=t0)
    assert proc.returncode == 0, explain(proc)
    assert row["attempt"] == 1 and row["status"] == "ok" and row["error_kind"] is None, row
    assert "timed out" in results[0], results[0][-500:]
    assert "still-alive" in results[1], results[1][-500:]  # the killed bomb's pids were free again
    assert row["env_outcomes"]["code"] == {"timeout": 1, "ok": 1}, row
    assert leaked == 0


@pytest.mark.slow  # failed in clean-clone runs on this 2-core machine; issue 18 stays open for it
def test_nine_hundred_busy_background_processes_leave_the_sandbox_the_agents(tmp_path, image, reliability):
    t0 = time.monotonic()
    proc, row, results, leaked = _run(tmp_path, [_python(BUSY_900), _shell("sleep 2; echo still-alive"),
                                                 _shell("echo again"), {"content": "<solution>0</solution>"}],
                                      "--command-timeout", 10)
    reliability.record("900 busy background processes in the sandbox (command timeout 10 s)",
                       f"attempt {row['attempt']}, row {row['status']}, env {row['env_outcomes']}", leaked=leaked,
                       started=t0)
    assert proc.returncode == 0, explain(proc)
    assert row["attempt"] == 1 and row["status"] == "ok" and row["error_kind"] is None, row
    # With 900 spinners in its one CPU, the sandbox may be too slow for any command (even the spawning one, on
    # a quiet 2-core host in CI): each ran or timed out, the agent's outcome either way (never infra: attempt 1).
    for result in results:
        assert any(word in result for word in ("spawned", "still-alive", "again", "timed out")), result[-500:]
    assert len(results) == 3 and set(row["env_outcomes"]["code"]) <= {"ok", "timeout"}, row
    assert leaked == 0


# Keeps the sandbox's pids limit full, every child asleep: what a backgrounded fork bomb leaves. The
# filler retries at once (yielding the CPU only), so a slot freed when a command's shell exits is taken
# again before the next command arrives even on a loaded host (a 10 ms sleep there once lasted long
# enough for `echo one` to start).
# The filler and its first 8 children keep forking once the limit is full: the command that filled it frees its
# own pid (and sandboxd's thread for it) as it ends, and one filler alone, not running at that moment on a loaded
# machine, let the next command take that room (seen once in a fresh-clone run: `echo one` ran).
FILL_PIDS = """
import os, time
full, made = False, 0
while True:
    try:
        pid = os.fork()
    except OSError:
        if not full:
            open("/tmp/pids-full", "w").close()
            full = True
        time.sleep(0.002)
        continue
    made += 1
    if pid == 0:
        if made > 8:
            time.sleep(10**6)
        made = 10**9
"""


def test_a_command_that_cannot_start_is_an_error_outcome(tmp_path, image, reliability):
    """Processes agent code left in the background fill the pids limit: the next commands cannot
    start; the agent reads why, and the trace counts them as `error`, not `ok`."""
    # Waits (up to 15 s, within the 20 s command timeout) until the filler's first fork fails, with bash
    # builtins only (a fork would wait out bash's retries once the limit is full): `read -t` on a FIFO
    # nobody writes is the pause.
    fill = ("mkfifo /tmp/tick && exec 3<>/tmp/tick; nohup python3 -c '" + FILL_PIDS.strip() + "' >/dev/null 2>&1 & "
            "for i in {1..150}; do [ -e /tmp/pids-full ] && break; read -t 0.1 -u 3; done; echo filled")
    t0 = time.monotonic()
    proc, row, results, leaked = _run(tmp_path, [_shell(fill), _shell("echo one"), _python("print(2)"),
                                                 {"content": "<solution>0</solution>"}], "--command-timeout", 20)
    reliability.record("commands that cannot start (pids limit full of background processes)",
                       f"env {row['env_outcomes']}, row {row['status']}", leaked=leaked, started=t0)
    assert proc.returncode == 0, explain(proc)
    assert row["attempt"] == 1 and row["status"] == "ok" and row["error_kind"] is None, row
    # The fork's EAGAIN or, when the child watcher's thread could not start, a RuntimeError: one message.
    assert all("cannot start: the sandbox's process limit is reached (" in r for r in results[1:]), results
    assert len(results) == 3, results
    assert row["env_outcomes"]["code"] == {"ok": 1, "error": 2}, row
    assert leaked == 0


@pytest.fixture
def docker_sandbox(provider, image, run_id):
    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="busy")) as sb:
        yield sb


class _Alive:
    """raise_if_dead of a sandbox whose container runs; counts the checks."""

    def __init__(self, dead: bool = False):
        self.checks, self.dead = 0, dead

    def __call__(self, cause):
        self.checks += 1
        if self.dead:
            raise SandboxDied("gone") from cause


@pytest.mark.parametrize("dead", [False, True])
def test_a_command_the_live_service_does_not_answer_in_time_timed_out(docker_sandbox, monkeypatch, dead):
    """The client gives up on an answer (read timeout) before the service does: a sandbox found alive,
    twice, makes it that command's timeout; a dead one is SandboxDied, as before."""
    monkeypatch.setattr(service, "EXEC_GRACE_S", -1.5)  # the client stops waiting 1.5 s before the deadline
    check = _Alive(dead)
    monkeypatch.setattr(docker_sandbox, "raise_if_dead", check)
    if dead:
        with pytest.raises(SandboxDied):
            docker_sandbox.shell("sleep 10", timeout=3)
        return
    result = docker_sandbox.shell("sleep 10", timeout=3)
    assert result.timed_out and result.exit_code == 137 and check.checks == 2, result
    assert "alive but too busy" in result.stderr
    monkeypatch.setattr(service, "EXEC_GRACE_S", 15.0)
    assert docker_sandbox.shell("echo next", timeout=10).stdout == "next\n"
