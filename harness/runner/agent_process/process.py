"""A running agent: one protocol, two implementations, one start path.

Each attempt's agent runs in a process of its own (runner/agent_process/child.py): it reads its request file,
writes its trace as it goes and its result file at the end. `AgentProcess` is all the harness knows
of that process:

- `pid`: the process, also the id of its process group (each agent process leads a session);
- `wait(timeout)`: True once it has ended; False when it still runs after `timeout` s (None: no limit);
- `kill()`: SIGKILL to its whole process group (the processes its tools started too); `wait()` then
  returns at once; killing an ended process is a no-op;
- `returncode`: its exit code once `wait` saw it end (a signal death is -N), else None;
- `result(killed=)`: the AgentResult it wrote. OwnFileRefused when the harness's own disk refused
  its trace or result (child.EXIT_CANNOT_WRITE): the harness's failure, never the agent's. Without a
  result, what its end says: the wall-time limit when the caller killed it at its deadline
  (`killed`); else the agent's error, with the tail of its stderr. InfraError when it ended only
  because the harness's machinery did (the fork server died and took it along): retried in a fresh
  sandbox and process;
- `trace()`: what its trace says (traces/forensics.py), read once, after it ended.

The implementations: `ForkedAgent`, a fork of the run's preloaded fork server (forkserver.py,
servers.py; a few milliseconds), and `FreshAgent`, a fresh interpreter (`python -m harness.runner.agent_process.child`,
~0.6 s of imports). `start` is the one start path: forked when the run's server for the agent has
loaded, else fresh (no server: HARNESS_AGENT_FORK=0, none started, or it failed or died). Either
leads its own process group and dies with the harness (agent_process/lifeline.py, the parent's pid given explicitly).
"""

from __future__ import annotations

import abc
import logging
import os
import signal
import subprocess
import sys
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from harness.agents.contract import AgentResult
from harness.errors import InfraError, OwnFileRefused
from harness.runner.agent_process.servers import Server
from harness.traces.forensics import TraceFacts, read_facts

log = logging.getLogger(__name__)
STDERR_TAIL = 3000  # characters of a failed agent process's stderr kept in its row


@dataclass(frozen=True)
class AgentFiles:
    """One agent process's files: its request and result (in a private scratch directory), its
    stderr, and its trace (in the run directory)."""

    request: Path
    result: Path
    stderr: Path
    trace: Path

    @classmethod
    def in_dir(cls, directory: Path, trace: Path) -> AgentFiles:
        return cls(directory / "request.json", directory / "result.json", directory / "stderr", trace)


class AgentProcess(abc.ABC):
    """A running agent process (see the module's docstring for each method's rule)."""

    pid: int

    def __init__(self, files: AgentFiles):
        self.files = files
        self.returncode: int | None = None
        self._trace: TraceFacts | None = None

    @abc.abstractmethod
    def _exit_code(self, timeout: float | None) -> int | None:
        """The exit code once ended within `timeout` s, else None."""

    def lost(self) -> str | None:
        """Why it ended with the harness's machinery (not by its own doing), else None."""
        return None

    def wait(self, timeout: float | None = None) -> bool:
        if self.returncode is None:
            self.returncode = self._exit_code(timeout)
        return self.returncode is not None

    def kill(self) -> None:
        # No group of that id: it ended meanwhile, or it is a fork not yet in its own session (the fork server
        # answers with the pid before the child's `setsid`), which is then killed alone.
        if self.returncode is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                with suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)

    def result(self, *, killed: bool = False) -> AgentResult:
        from harness.runner.agent_process.child import EXIT_CANNOT_WRITE  # here: child.py imports every tool family

        written = self.files.result.exists()
        if self.returncode == EXIT_CANNOT_WRITE:
            why = AgentResult.model_validate_json(self.files.result.read_text()).error if written else self._stderr()
            raise OwnFileRefused(why or f"the harness could not write the agent's result in "
                                 f"{self.files.result.parent} (its disk is full or refuses files)")
        if written:
            return AgentResult.model_validate_json(self.files.result.read_text())
        if lost := self.lost():
            raise InfraError(lost)
        if killed:
            return AgentResult(limit="wall_time")
        return AgentResult(error_kind="agent", error=f"agent process exited {self.returncode}: {self._stderr()}")

    def _stderr(self) -> str:
        """The tail of its stderr ("" when there is none to read)."""
        try:
            return self.files.stderr.read_text(errors="replace")[-STDERR_TAIL:].strip()
        except OSError:
            return ""

    def trace(self) -> TraceFacts:
        if self._trace is None:
            self._trace = read_facts(self.files.trace)
        return self._trace


class FreshAgent(AgentProcess):
    """A fresh interpreter: `python -m harness.runner.agent_process.child REQUEST RESULT PARENT_PID`."""

    def __init__(self, files: AgentFiles):
        super().__init__(files)
        with open(files.stderr, "wb") as err:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "harness.runner.agent_process.child", str(files.request), str(files.result),
                 str(os.getpid())],
                start_new_session=True, stdout=subprocess.DEVNULL, stderr=err)
        self.pid = self._proc.pid

    def _exit_code(self, timeout: float | None) -> int | None:
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class ForkedAgent(AgentProcess):
    """A fork of the run's fork server; RuntimeError when the server cannot fork it."""

    def __init__(self, files: AgentFiles, server: Server):
        super().__init__(files)
        self.pid = server.spawn(str(files.request), str(files.result), str(files.stderr))
        self._server, self._exit = server, server.exit_of(self.pid)

    def _exit_code(self, timeout: float | None) -> int | None:
        try:
            return self._exit.result(timeout)
        except FutureTimeout:
            return None

    def lost(self) -> str | None:
        """The server died and took this process along: the harness's machinery, not the agent."""
        return self._server.death() if self.pid in self._server.orphaned else None


def start(files: AgentFiles, server: Server | None) -> AgentProcess:
    """The agent's process: forked from `server` (the run's, loaded: servers.py `server_for`), else started
    fresh."""
    if server is not None and not server.dead:
        try:
            return ForkedAgent(files, server)
        except RuntimeError as exc:
            log.warning("fork server failed (%s): starting the agent process fresh", exc)
    return FreshAgent(files)
