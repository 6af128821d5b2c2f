"""Conformance: how `Sandbox.exec` (and `shell`, `python`) run commands and report how they ended."""

from __future__ import annotations

import hashlib
import secrets
import time

import pytest

from harness.errors import SandboxUnsupported
from tests.helpers.wait import wait_for

# Lists processes whose command line contains argv[1] (procps may not be in every image; python3 is).
PROCS_WITH = """
import os, sys
for pid in os.listdir('/proc'):
    try:
        args = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode(errors='replace')
    except OSError:
        continue
    if pid.isdigit() and sys.argv[1] in args and pid != str(os.getpid()):
        print(pid, args)
"""


def test_exit_codes_and_separate_streams(sandbox):
    result = sandbox.shell("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok and not result.timed_out and result.signal is None
    assert result.duration >= 0
    assert sandbox.exec(["true"]).ok
    assert sandbox.exec(["false"]).exit_code == 1


def test_stdin_as_text(sandbox):
    text = "héllo\nwörld ✓\n" * 100
    assert sandbox.exec(["cat"], stdin=text).stdout == text
    assert sandbox.python("import sys; print(6 * 7, file=sys.stderr); print('py ok')").stdout == "py ok\n"


def test_stdin_as_bytes(sandbox):
    payload = bytes(range(256)) * 1000 + b"\x00\xff\xfe"
    digest = sandbox.exec(["python3", "-c", "import sys, hashlib; "
                           "print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"], stdin=payload)
    assert digest.stdout.strip() == hashlib.sha256(payload).hexdigest()


def test_without_stdin_a_command_reads_eof(sandbox):
    result = sandbox.exec(["cat"], timeout=10)
    assert result.ok and result.stdout == "" and not result.timed_out


def test_env_and_cwd(sandbox):
    result = sandbox.exec(["bash", "-c", 'echo "$FOO|$EMPTY|$(pwd)"'], env={"FOO": "a b", "EMPTY": ""}, cwd="/tmp")
    assert result.stdout == "a b||/tmp\n"
    assert sandbox.shell("pwd").stdout == "/workspace\n"  # the default cwd
    assert "FOO" not in sandbox.shell("env").stdout  # env is per command


def test_commands_run_as_the_unprivileged_agent_and_do_not_see_the_service_token(sandbox):
    assert sandbox.exec(["id", "-un"], user="agent").stdout == "agent\n"
    assert sandbox.shell("id -u").stdout.strip() != "0"
    environment = sandbox.shell("env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'").stdout
    secrets_ = [v for v in sandbox.connection().headers.values() if len(v) >= 16]
    assert secrets_, "the connection carries no token to check"
    assert not any(secret in environment for secret in secrets_)


def test_another_user_is_unsupported(sandbox):
    with pytest.raises(SandboxUnsupported):
        sandbox.exec(["id"], user="root")
    with pytest.raises(SandboxUnsupported):
        sandbox.shell("id", user="nobody")


def test_timeout_none_runs_to_completion(sandbox):
    started = time.monotonic()
    result = sandbox.shell("sleep 2; echo done", timeout=None)
    assert (result.exit_code, result.stdout, result.timed_out) == (0, "done\n", False)
    assert time.monotonic() - started >= 2


def test_command_not_found_is_127_with_the_reason(sandbox):
    result = sandbox.exec(["no-such-command-" + secrets.token_hex(3)])
    assert result.exit_code == 127 and result.signal is None and not result.timed_out
    assert "No such file or directory" in result.stderr or "not found" in result.stderr
    assert sandbox.exec(["/no/such/path/tool"]).exit_code == 127


def test_not_executable_is_126(sandbox):
    sandbox.shell("mkdir -p /tmp/exec126 && printf '#!/bin/sh\\necho ran\\n' > /tmp/exec126/tool "
                  "&& chmod 644 /tmp/exec126/tool")
    result = sandbox.exec(["/tmp/exec126/tool"])
    assert result.exit_code == 126 and result.stdout == ""
    assert "ermission denied" in result.stderr
    assert sandbox.exec(["/tmp/exec126"]).exit_code == 126  # a directory
    assert sandbox.exec(["/etc/shadow"]).exit_code == 126  # not even readable


def test_missing_cwd_is_127(sandbox):
    result = sandbox.exec(["true"], cwd="/no/such/dir")
    assert result.exit_code == 127 and not result.ok
    assert "/no/such/dir" in result.stderr


@pytest.mark.parametrize("argv, sig", [
    (["bash", "-c", "kill -TERM $$"], 15),
    (["python3", "-c", "import os; os.kill(os.getpid(), 9)"], 9),
    (["bash", "-c", "kill -INT $$; sleep 5"], 2),
])
def test_killed_by_a_signal_is_128_plus_n(sandbox, argv, sig):
    result = sandbox.exec(argv, timeout=30)
    assert (result.exit_code, result.signal, result.timed_out) == (128 + sig, sig, False)
    assert not result.ok


def test_timeout_kills_the_whole_process_tree(sandbox):
    marker = f"5{secrets.randbelow(10**5)}.25"
    command = (f"sleep {marker}1 & (sleep {marker}2 &) ; setsid sleep {marker}3 & "
               f"(setsid sleep {marker}4 &) ; python3 -c 'import time; time.sleep({marker}5)'")
    started = time.monotonic()
    result = sandbox.shell(command, timeout=1.5)
    elapsed = time.monotonic() - started
    assert result.timed_out and not result.ok
    assert (result.exit_code, result.signal) == (137, 9)
    assert 1.5 <= elapsed < 10
    wait_for(lambda: sandbox.exec(["python3", "-c", PROCS_WITH, marker]).stdout == "", 10,
             "the timed-out command's processes to be gone")


def test_timeout_holds_while_a_command_ignores_its_stdin(sandbox):
    started = time.monotonic()
    result = sandbox.exec(["sleep", "60"], stdin="x" * (4 << 20), timeout=1.5)
    assert result.timed_out and result.exit_code == 137
    assert time.monotonic() - started < 10


def test_output_cap_truncates_and_says_so(sandbox):
    big = sandbox.shell("head -c 3000000 /dev/zero | tr '\\0' a; echo err >&2", max_output=1000)
    assert big.ok and big.stdout_truncated and not big.stderr_truncated
    assert big.stdout.startswith("a" * 1000) and not big.stdout.startswith("a" * 1001)
    assert "2999000" in big.stdout  # the marker says how much was dropped
    assert len(big.stdout) < 1200 and big.stderr == "err\n"
    both = sandbox.shell("head -c 5000 /dev/zero >&2; echo small", max_output=100)
    assert both.stderr_truncated and not both.stdout_truncated and both.stdout == "small\n"
    full = sandbox.shell("head -c 200000 /dev/zero | tr '\\0' b")
    assert full.stdout == "b" * 200000 and not full.stdout_truncated  # the default keeps 1 MiB


def test_non_utf8_output_does_not_raise(sandbox):
    result = sandbox.shell("printf 'ok\\xff\\xfe\\x00end'; printf '\\xc3' >&2")
    assert result.ok
    assert result.stdout == "ok\ufffd\ufffd\x00end"
    assert result.stderr == "\ufffd"
