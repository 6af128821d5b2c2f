"""A command that ran and exited nonzero is not `ok` (issue 29 item 14: 'code ok: 13' when all 13
runs of a real model's code exited 1 with a traceback). The code environment's outcome says whether
the code failed: `nonzero_exit`, beside `ok`, `timeout`, `error` (never started) and `crashed`. No
Docker: a stand-in sandbox returns the exit codes."""

from __future__ import annotations

import time

from rich.console import Console

from harness.environments.code import CodeEnv
from harness.report import build_report
from harness.report.output import render
from harness.results.model import ResultRow
from harness.sandbox.contract import ExecResult
from harness.traces import Tracer, read_events
from harness.traces.forensics import read_facts


class ExitsWith:
    """Only what CodeEnv asks of a sandbox: each command ends with the next of `codes`."""

    def __init__(self, *codes: int):
        self.codes = list(codes)

    def python(self, code: str, timeout: float) -> ExecResult:
        code_ = self.codes.pop(0)
        return ExecResult(exit_code=code_, stdout="", stderr="Traceback ...\nZeroDivisionError" if code_ else "")

    shell = python


def test_a_nonzero_exit_is_its_own_outcome(tmp_path, reliability):
    started = time.monotonic()
    trace = tmp_path / "t.jsonl"
    env = CodeEnv(ExitsWith(1, 1, 0, 2), Tracer(trace))  # type: ignore[arg-type]
    for _ in range(3):
        env.run_python("1/0")
    env.run_shell("false")
    outcomes = [e["outcome"] for e in read_events(trace) if e["type"] == "env"]
    assert outcomes == ["nonzero_exit", "nonzero_exit", "ok", "nonzero_exit"]
    facts = read_facts(trace)
    assert facts.env_outcomes == {"code": {"nonzero_exit": 3, "ok": 1}}
    row = ResultRow(instance_id="a", status="ok", answer="x", target="x", correct=True,
                    env_outcomes=facts.env_outcomes)
    console = Console(width=200, record=True)
    console.print(render(build_report([row], ["a"], leaked_containers=0)))
    assert "code nonzero_exit: 3, ok: 1" in console.export_text()
    reliability.record("code that exits 1 with a traceback, 3 of 4 commands",
                       "env outcomes code nonzero_exit: 3, ok: 1 (was ok: 4)", started=started)
