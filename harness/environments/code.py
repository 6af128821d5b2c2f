"""The code environment: run Python or shell inside the instance's sandbox.

Each command is one `env` trace event: outcome `timeout` when it was killed at its limit,
`error` when it never ran (no process could be started: e.g. agent code filled the sandbox's
pids limit), `nonzero_exit` when it ran and exited nonzero (the code failed: a traceback, a
`false`), `ok` when it ran and exited 0; `crashed` with the InfraError that stops the instance."""

from __future__ import annotations

import time

from harness.errors import InfraError
from harness.sandbox.contract import ExecResult, Sandbox
from harness.traces import EnvAction, Tracer


def format_result(result: ExecResult) -> str:
    """How a command's outcome reads to a model."""
    parts = []
    if result.timed_out:
        parts.append(f"[timed out after {result.duration:.0f}s; the command and its children were killed]")
    parts.append(f"exit code: {result.exit_code}")
    if result.stdout:
        parts.append("stdout:\n" + result.stdout)
    if result.stderr:
        parts.append("stderr:\n" + result.stderr)
    return "\n".join(parts)


class CodeEnv:
    def __init__(self, sandbox: Sandbox, tracer: Tracer, *, timeout: float = 120.0):
        self.sandbox, self.tracer, self.timeout = sandbox, tracer, timeout

    def _traced(self, action: str, args: dict, call) -> ExecResult:
        started = time.monotonic()
        try:
            result = call()
        except InfraError as exc:
            self.tracer.emit(EnvAction(env="code", action=action, args=args, outcome="crashed",
                                       seconds=round(time.monotonic() - started, 4),
                                       error=f"{type(exc).__name__}: {exc}"))
            raise
        outcome = ("timeout" if result.timed_out else "error" if not result.started
                   else "nonzero_exit" if result.exit_code != 0 else "ok")
        self.tracer.emit(EnvAction(env="code", action=action, args=args, outcome=outcome,
                                   seconds=round(time.monotonic() - started, 4), exit_code=result.exit_code,
                                   stdout=result.stdout[-4000:], stderr=result.stderr[-4000:],
                                   **({"error": result.stderr.strip()[:500]} if outcome == "error" else {})))
        return result

    def run_python(self, code: str, timeout: float | None = None) -> ExecResult:
        return self._traced("run_python", {"code": code},
                            lambda: self.sandbox.python(code, timeout=timeout or self.timeout))

    def run_shell(self, command: str, timeout: float | None = None) -> ExecResult:
        return self._traced("run_shell", {"command": command},
                            lambda: self.sandbox.shell(command, timeout=timeout or self.timeout))
