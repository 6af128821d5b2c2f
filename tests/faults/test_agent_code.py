"""Agent code against its own sandbox: background servers, the service's token, oversized requests.

Items 3 and 8 of issue 9: `server &` used to hold the command that started it until its
timeout (and the server was then killed); the service's token was readable in
/proc/1/environ; a request asking for a huge `max_output` could make PID 1 run out of memory.
"""

from __future__ import annotations

import time

import pytest

from harness.sandbox.contract import SandboxSpec

pytestmark = pytest.mark.docker


@pytest.fixture
def sandbox(provider, image, run_id):
    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="agent-code")) as sb:
        yield sb


def test_a_background_process_does_not_hold_its_command(sandbox, reliability):
    t0 = time.monotonic()
    quick = sandbox.shell("sleep 6 & echo hi", timeout=30)
    took = time.monotonic() - t0
    reliability.record("`sleep 6 & echo hi`", f"returned in {took:.1f} s", seconds=took)
    assert quick.stdout == "hi\n" and quick.exit_code == 0
    assert took < 3, took


def test_a_server_started_in_the_background_keeps_serving(sandbox, reliability):
    t0 = time.monotonic()
    started = sandbox.shell("python3 -m http.server 8000 >/dev/null 2>&1 & sleep 0.5; echo started", timeout=20)
    took = time.monotonic() - t0
    # The server's Python may take seconds to listen on a loaded host: the request retries for up to 15 s.
    fetched = sandbox.shell("python3 -c \"import time, urllib.request as u\n"
                            "for _ in range(150):\n"
                            "    try: print(u.urlopen('http://127.0.0.1:8000/').status); break\n"
                            "    except OSError: time.sleep(0.1)\"", timeout=30)
    answered = fetched.stdout.strip() or fetched.stderr[-80:]
    reliability.record("`python3 -m http.server 8000 & ...` then a request to it",
                       f"command returned in {took:.1f} s; server answered {answered}",
                       seconds=took)
    assert started.stdout == "started\n" and not started.timed_out
    assert took < 5, took
    assert fetched.stdout.strip() == "200", fetched


def test_the_service_token_is_not_readable_by_agent_code(sandbox, reliability):
    token = sandbox.connection().headers["X-Harness-Token"]
    probe = sandbox.shell("cat /proc/1/environ /proc/self/environ 2>&1 | tr '\\0' '\\n'; env; "
                          "cat /proc/1/cmdline; echo done", timeout=20)
    found = token in probe.stdout or token in probe.stderr
    reliability.record("agent code looks for the service token (/proc/1/environ, env)",
                       "not found" if not found else "FOUND")
    assert "done" in probe.stdout
    assert not found


# Agent code under sandboxd's own uid reads PID 1's memory, region by region (/proc/1/maps then
# /proc/1/mem), and looks for the token: issue 18 item 11 (it was found there).
READ_PID1_MEMORY = r"""
import re, sys
needle = sys.argv[1].encode()
try:
    maps = open('/proc/1/maps').read().splitlines()
    mem = open('/proc/1/mem', 'rb', 0)
except OSError as exc:
    print('refused', type(exc).__name__); sys.exit(0)
read = 0
for line in maps:
    start, end = (int(x, 16) for x in line.split()[0].split('-'))
    if 'r' not in line.split()[1]:
        continue
    try:
        mem.seek(start); data = mem.read(end - start)
    except (OSError, OverflowError, ValueError):
        continue
    read += len(data)
    if needle in data:
        print('FOUND'); sys.exit(0)
print('read', read, 'bytes, not found')
"""


def test_the_service_token_is_not_in_pid1s_memory_for_agent_code(sandbox, reliability):
    token = sandbox.connection().headers["X-Harness-Token"]
    probe = sandbox.exec(["python3", "-c", READ_PID1_MEMORY, token], timeout=60)
    outcome = probe.stdout.strip() or probe.stderr.strip()[-200:]
    reliability.record("agent code reads PID 1's memory (/proc/1/mem) for the service token", outcome)
    assert probe.exit_code == 0, probe
    assert outcome.startswith("refused"), outcome  # not readable at all: PID 1 is not dumpable


def test_a_huge_max_output_is_clamped_and_pid1_survives(sandbox, reliability):
    t0 = time.monotonic()
    result = sandbox.shell("head -c 100M /dev/zero | tr '\\0' a", max_output=2**40, timeout=120)
    kept = len(result.stdout)
    alive = sandbox.shell("echo alive").stdout
    reliability.record("100 MB of output with max_output=2**40", f"kept {kept / 2**20:.0f} MiB (clamped), "
                       f"service {'alive' if alive == 'alive' + chr(10) else 'DEAD'}", started=t0)
    assert result.stdout_truncated
    assert kept <= 64 * 2**20 + 200  # the service's cap, plus its truncation note
    assert alive == "alive\n"


def test_a_conversion_that_times_out_says_timeout_and_the_limit(sandbox, reliability, tmp_path, monkeypatch):
    """Issue 18 item 11: markitdown stuck on a file (here a FIFO nobody writes: its open never returns)
    was reported as an `error` with an empty reason. Now a `timeout` naming the limit."""
    from harness.environments import files
    from harness.traces import Tracer, read_trace

    monkeypatch.setattr(files, "CONVERT_TIMEOUT_S", 5.0)
    sandbox.shell("mkfifo /workspace/stuck.pipe")
    trace = tmp_path / "trace.jsonl"
    t0 = time.monotonic()
    text = files.FileEnv(sandbox, Tracer(trace)).read("stuck.pipe")
    took = time.monotonic() - t0
    (event,) = [e for e in read_trace(trace) if e.type == "env"]
    reliability.record("markitdown conversion that outlasts its limit (a FIFO)",
                       f"env outcome {event.outcome}: {text[:80]}", seconds=took)
    assert text == "Error: timeout: converting 'stuck.pipe' took longer than the 5 s limit", text
    assert event.outcome == "timeout" and event.error == text.removeprefix("Error: ")
    assert took < 60


def test_copy_in_over_a_file_the_agent_made_read_only_is_refused(sandbox, reliability, tmp_path):
    """Issue 18 item 10 (the contract's side is in tests/conformance/test_files.py): `chmod -w` held
    against the agent's own writes but copy_in replaced the file."""
    from harness.errors import SandboxPermissionDenied

    (tmp_path / "answer.txt").write_text("harness")
    sandbox.shell("echo agent > /workspace/answer.txt && chmod a-w /workspace/answer.txt")
    try:
        sandbox.copy_in(tmp_path, ["answer.txt"])
        outcome = "replaced"
    except SandboxPermissionDenied as exc:
        outcome = f"SandboxPermissionDenied: {exc}"
    kept = sandbox.read_file("/workspace/answer.txt")
    reliability.record("copy_in over a file the agent made read-only (chmod -w)",
                       f"{outcome}; file kept: {kept == b'agent' + chr(10).encode()}")
    assert outcome.startswith("SandboxPermissionDenied") and "/workspace/answer.txt" in outcome, outcome
    assert kept == b"agent\n"
