"""One attempt's agent process, run to its end under the wall-clock limit; all of them stopped on Ctrl-C.

`run_agent` writes the request into a private directory of the run's scratch (DIR/.harness-tmp,
never /tmp: the request holds the sandbox's token), starts the agent (process.py `start`: forked from
the run's fork server for the agent when it has one, servers.py), waits
for it until the instance's wall-clock limit, kills its whole process group past it, and returns
what it ended with: its result, whether it was killed at the limit, and its trace's facts (read
once). Its files are removed when it ends, or by the next run's `reset_scratch` if this one is
killed. A file the harness cannot write for itself (its request and stderr files here, its trace or
result in the agent: child.EXIT_CANNOT_WRITE) is the harness's failure (OwnFileRefused), never the
agent's.

`kill_all` (Ctrl-C) kills every running agent process and starts no more; `stopping()` then says so
to the instance loop, which retries nothing. An attempt that would start after it is cancelled.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.agents.contract import AgentRequest, AgentResult
from harness.errors import OwnFileRefused
from harness.results.layout import RunDir
from harness.runner.agent_process.process import AgentFiles, AgentProcess, start
from harness.runner.agent_process.servers import ForkServers
from harness.traces.forensics import TraceFacts, read_facts

_live: set[AgentProcess] = set()
_live_lock = threading.Lock()
_stopping = threading.Event()


@dataclass(frozen=True)
class Ended:
    result: AgentResult
    killed: bool  # killed at the wall-clock limit
    trace: TraceFacts


def kill_all() -> None:
    """Kill every running agent process and start no more (Ctrl-C); sandboxes are still removed."""
    with _live_lock:
        _stopping.set()
        for proc in list(_live):
            proc.kill()


def stopping() -> bool:
    return _stopping.is_set()


def cancelled() -> AgentResult:
    return AgentResult(error_kind="infra", error="cancelled (Ctrl-C)", retryable=False)


def _private_dir(path: Path) -> Path:
    """A directory only this user can enter (the request files in it hold sandbox tokens)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def reset_scratch(output_dir: Path) -> None:
    """Empty DIR/.harness-tmp: what a killed run left there (tokens included) goes when the next run starts.
    Called under the output-dir lock, so no other run is using it."""
    scratch = RunDir(output_dir).scratch
    shutil.rmtree(scratch, ignore_errors=True)
    _private_dir(scratch)


@contextmanager
def own_write(what: str, path: Path) -> Iterator[None]:
    """A file the harness writes for itself (a full disk, a read-only mount) failing is the harness's
    failure (OwnFileRefused), with its path and the OS error: never the agent's."""
    try:
        yield
    except OSError as exc:
        raise OwnFileRefused(f"cannot write {what} {path}: {exc}") from exc


def run_agent(request: AgentRequest, timeout: float | None, scratch: Path, forks: ForkServers | None = None) -> Ended:
    with own_write("the agent's request file in", scratch):
        tmp_dir = tempfile.TemporaryDirectory(prefix="child-", dir=_private_dir(scratch), ignore_cleanup_errors=True)
    with tmp_dir as tmp:
        files = AgentFiles.in_dir(Path(tmp), Path(request.trace_path))
        with own_write("the agent's request file", files.request):
            fd = os.open(files.request, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(request.model_dump_json())
        with own_write("the agent's stderr file", files.stderr):  # made here: the agent's process only opens it
            os.close(os.open(files.stderr, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        with _live_lock:
            if _stopping.is_set():
                return Ended(cancelled(), False, read_facts(files.trace))
            proc = start(files, None if forks is None else forks.server_for(request.agent))
            _live.add(proc)
        killed = False
        try:
            killed = not proc.wait(timeout)
        finally:
            if proc.returncode is None:
                proc.kill()
                proc.wait()
            with _live_lock:
                _live.discard(proc)
        return Ended(proc.result(killed=killed), killed, proc.trace())
