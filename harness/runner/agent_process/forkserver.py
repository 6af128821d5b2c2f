"""Agent processes forked from a preloaded server instead of started fresh.

A fresh agent process spends ~0.6 s importing the agent framework, the model clients and the
harness, and ~0.1 s tearing the interpreter down, against ~40 ms of the agent's own work with
a replay model. The fork server imports all that once per run; each agent process is then a
fork of it (a few milliseconds), and ends with `os._exit` once its result is written. `harness run`
starts the server as a fork of itself before it reads the dataset (it has imported the harness,
pydantic and the Docker SDK by then, so the server imports only the agent's own modules: ~0.1 s of
CPU against ~0.4 s for a fresh interpreter); a harness with other threads running starts a fresh
interpreter instead (`python -m harness.runner.agent_process.forkserver`), since a fork would inherit
their locks.

What a fresh process gave is kept:
- its own session and process group (`setsid` in the child), which the harness kills whole at
  the wall-clock limit (`os.killpg`), as before;
- death with the harness: the server dies with the harness (PR_SET_PDEATHSIG, plus it watches
  its parent and its stdin), and each child dies with the server (PR_SET_PDEATHSIG, plus
  child.py's watch of its parent);
- nothing shared between instances: the server never runs agent code, so every child starts
  from the same pristine state (module globals, environment, caches), and what one child
  changes dies with it. It holds no threads, no event loop and no engine connection when it
  forks.

This module is the server's side (what runs in the server process); servers.py is the harness's: the
server's process (`Server`) and a run's servers (`ForkServers`, the one way a server starts).

Protocol (JSON lines): the harness writes {"id", "request", "result", "stderr"} to the server's
stdin; the server answers {"id", "pid"} once forked and {"pid", "exit"} once that child has
ended (a signal death is -N). A server that cannot start or dies makes the harness fall back to
fresh processes (`HARNESS_AGENT_FORK=0` chooses them from the start); the agents a dying server takes
along are the harness's machinery failing, not the agents: `orphaned` holds them, the agent process
says so (runner/agent_process/process.py ForkedAgent) and the runner records an infra error (retried
in a fresh sandbox and process).

What the server imports is declared, never named here: the agent process's own modules, then the
sandbox provider's (its module and its class's `preload`: sandbox/registry.py `preload`) and the
agent runner's (`AgentRunner.preload`: agents/registry.py `preload`).

    python -m harness.runner.agent_process.forkserver PARENT_PID AGENT PROVIDER
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import sys

from harness.runner.agent_process.lifeline import die_with, orphaned

log = logging.getLogger(__name__)


def preload(agent: str, provider: str) -> None:
    """Import what every agent process of this run needs (best effort: a failure shows in the child)."""
    import importlib

    from harness.agents import registry as agents
    from harness.environments import CodeEnv  # noqa: F401
    from harness.environments.families import load_benchmarks
    from harness.runner.agent_process import child  # the child's own imports, and what it declares
    from harness.sandbox import registry as sandboxes
    from harness.settings import settings
    from harness.traces.events import build_schemas

    settings()
    build_schemas()
    try:
        load_benchmarks()  # every benchmark's package and tool families (they register on import)
    except Exception:  # noqa: BLE001 - a bad benchmark package fails in the preflight and the child, not here
        pass
    modules: list[str] = list(child.PRELOAD)
    for declared in (lambda: sandboxes.preload(provider), lambda: agents.preload(agent)):
        try:
            modules += declared()
        except Exception:  # noqa: BLE001 - a bad name fails in the preflight and the child, not here
            pass
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            pass


def _child(message: dict, server_pid: int, fds: tuple[int, ...]) -> None:
    """In the forked process: become the agent's process (child.py), then exit without teardown."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in fds:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(message["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        die_with(server_pid, watch=True)
        from pathlib import Path

        from harness.agents.contract import AgentRequest
        from harness.runner.agent_process import child

        request = AgentRequest.model_validate_json(Path(message["request"]).read_text())
        code = child.run(request, Path(message["result"]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported on stderr, as a fresh process would
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def _send(out, payload: dict) -> None:
    out.write((json.dumps(payload) + "\n").encode())
    out.flush()


def serve(harness_pid: int, agent: str, provider: str, stdin: int = 0, out=None) -> None:
    """The server's loop: requests on fd `stdin`, answers on the binary stream `out` (stdout)."""
    die_with(harness_pid)  # no watch thread: the loop below asks, as the server must not hold threads
    preload(agent, provider)
    import gc

    gc.collect()
    gc.freeze()  # the preloaded objects stay shared, untouched by the children's collections
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    out = out or sys.stdout.buffer
    server_pid = os.getpid()
    _send(out, {"ready": server_pid})
    pending, children = b"", set()
    while True:
        ready, _, _ = select.select([stdin, wake_r], [], [], 0.5)
        if orphaned(harness_pid):
            break
        if wake_r in ready:
            os.read(wake_r, 4096)
        if stdin in ready:
            chunk = os.read(stdin, 65536)
            if not chunk:
                break  # the harness closed the pipe: the run is over
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                message = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(message, server_pid, (stdin, wake_r, wake_w))
                children.add(pid)
                _send(out, {"id": message["id"], "pid": pid})
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            _send(out, {"pid": pid, "exit": os.waitstatus_to_exitcode(status)})
    for pid in children:  # the run is over or the harness died: no agent outlives it
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.stdin.fileno(), sys.stdout.buffer)
