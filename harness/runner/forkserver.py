"""Agent processes forked from a preloaded server instead of started fresh.

A fresh agent process spends ~0.6 s importing the agent framework, the model clients and the
harness, and ~0.1 s tearing the interpreter down, against ~40 ms of the agent's own work with
a replay model. The fork server imports all that once per run; each agent process is then a
fork of it (a few milliseconds), and ends with `os._exit` once its result is written. `harness run`
starts the server as a fork of itself before it reads the dataset (it has imported the harness,
pydantic and the Docker SDK by then, so the server imports only the agent's own modules: ~0.1 s of
CPU against ~0.4 s for a fresh interpreter); a harness with other threads running starts a fresh
interpreter instead (`python -m harness.runner.forkserver`), since a fork would inherit their locks.

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

    python -m harness.runner.forkserver PARENT_PID AGENT PROVIDER
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future

from harness.runner.agent_process.lifeline import die_with, orphaned

log = logging.getLogger(__name__)


def preload(agent: str, provider: str) -> None:
    """Import what every agent process of this run needs (best effort: a failure shows in the child)."""
    import importlib

    import harness.runner.child  # noqa: F401 - the child's own imports
    from harness.agents import registry as agents
    from harness.agents import user  # noqa: F401
    from harness.environments import CodeEnv  # noqa: F401
    from harness.models import meter  # noqa: F401
    from harness.sandbox import registry as sandboxes
    from harness.settings import settings

    settings()
    modules: list[str] = []
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
        from harness.runner import child

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


# --- the harness's side -------------------------------------------------------------------------

class _ForkedProcess:
    """A fork of this harness process running `serve`, shaped like the subprocess.Popen of a fresh
    server (stdin, stdout, wait, kill). Taken only while this process has no other thread, before
    it has read the dataset or opened any engine connection, so the fork holds just the imported
    modules: the server then imports only what the harness itself did not."""

    def __init__(self, agent: str, provider: str):
        to_server, from_server = os.pipe(), os.pipe()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the server
            try:
                os.setsid()
                for signum in (signal.SIGTERM, signal.SIGHUP):
                    signal.signal(signum, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(to_server[0], 0)
                os.dup2(from_server[1], 1)
                os.dup2(null, 2)
                os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # pipes, lock files, sockets: none of the harness's
                serve(parent, agent, provider, 0, open(1, "wb", closefd=False))
            finally:
                os._exit(0)
        os.close(to_server[0])
        os.close(from_server[1])
        self.pid = pid
        self.returncode: int | None = None
        self.stdin, self.stdout = open(to_server[1], "wb"), open(from_server[0], "rb")

    def wait(self, timeout: float | None = None) -> int:
        start = time.monotonic()
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, 0 if timeout is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif timeout is not None and time.monotonic() - start >= timeout:  # 0 only from WNOHANG
                raise subprocess.TimeoutExpired("fork server", timeout)
            else:
                time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


class Server:
    """One fork server for one agent name (see `start`); `ready` resolves once it has loaded."""

    def __init__(self, agent: str, proc):
        self.agent, self.proc = agent, proc
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pids: dict[int, Future] = {}
        self._exits: dict[int, Future] = {}
        self.dead = False
        self._died: str | None = None  # how the server ended (death() asks once)
        self.orphaned: set[int] = set()  # children whose end was learnt from the server's death
        self.ready: Future = Future()
        threading.Thread(target=self._read, args=(self.ready,), name="forkserver-reader", daemon=True).start()

    @classmethod
    def fresh(cls, agent: str, provider: str) -> Server:
        """A server in a fresh interpreter (imports everything itself)."""
        return cls(agent, subprocess.Popen(
            [sys.executable, "-m", "harness.runner.forkserver", str(os.getpid()), agent, provider],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True))

    def death(self) -> str:
        """How the dead server ended, for the rows of the agents it took along."""
        with self._lock:
            if self._died is None:
                code = None
                with contextlib.suppress(Exception):
                    code = self.proc.wait(2)
                how = ("it exited" if code is None else f"killed by signal {-code}" if code < 0 else f"exit {code}")
                self._died = (f"the agents' fork server (pid {self.proc.pid}) died ({how}) "
                              "and took the agent process along")
            return self._died

    def exit_of(self, pid: int) -> Future:
        with self._lock:
            future = self._exits.setdefault(pid, Future())
            if self.dead and not future.done():
                self.orphaned.add(pid)
                future.set_result(-signal.SIGKILL)
            return future

    def _read(self, ready: Future) -> None:
        for line in self.proc.stdout:
            message = json.loads(line)
            if "ready" in message:
                ready.set_result(message["ready"])
            elif "exit" in message:
                future = self.exit_of(message["pid"])
                if not future.done():
                    future.set_result(message["exit"])
            else:
                with self._lock:
                    spawned = self._pids.pop(message["id"], None)
                if spawned is not None:
                    spawned.set_result(message["pid"])
        self.dead = True  # the server is gone: whatever waits learns it now
        if not ready.done():
            ready.set_exception(RuntimeError("the fork server exited before it was ready"))
        with self._lock:
            spawning, running = list(self._pids.values()), list(self._exits.items())
        for future in spawning:
            if not future.done():
                future.set_exception(RuntimeError("the fork server died"))
        with self._lock:
            for pid, future in running:  # its children die with it (PR_SET_PDEATHSIG)
                if not future.done():
                    self.orphaned.add(pid)
                    with contextlib.suppress(OSError):  # gone already, or within moments
                        os.killpg(pid, signal.SIGKILL)
                    future.set_result(-signal.SIGKILL)

    def spawn(self, request: str, result: str, stderr: str, timeout: float = 30) -> int:
        """Fork an agent process, its pid (its end: `exit_of`); RuntimeError when the server cannot."""
        future: Future = Future()
        with self._lock:
            if self.dead:
                raise RuntimeError("the fork server died")
            ident = next(self._ids)
            self._pids[ident] = future
            payload = json.dumps({"id": ident, "request": request, "result": result, "stderr": stderr}) + "\n"
            try:
                self.proc.stdin.write(payload.encode())
                self.proc.stdin.flush()
            except OSError as exc:
                self.dead = True
                raise RuntimeError(f"the fork server is gone: {exc}") from exc
        return future.result(timeout)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        if not self.ready.done():  # still loading, so no agent forked yet: a run with nothing to do
            self.proc.kill()  # (a resume of a finished run) does not wait for it to finish loading
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


READY_TIMEOUT = 120  # seconds for a server to load; beyond it agent processes start fresh
_servers: dict[str, Future] = {}  # agent name -> Future of its Server (None: disabled or failed)
_servers_lock = threading.Lock()
_keeper: queue.Queue[tuple] = queue.Queue()
_keeper_thread: threading.Thread | None = None


def _keep() -> None:
    # PR_SET_PDEATHSIG fires when the *thread* that started the server ends: this one never does.
    while True:
        agent, provider, future = _keeper.get()
        try:
            future.set_result(Server.fresh(agent, provider))
        except Exception as exc:  # noqa: BLE001 - fresh processes still work
            log.warning("no fork server for agent %s (%s): agent processes start fresh", agent, exc)
            future.set_result(None)


def start(agent: str, provider: str | None = None) -> Future:
    """Begin loading `agent`'s fork server (once per run) without waiting for it to load. From the
    main thread of a process with no other thread (`harness run` calls this before it reads the
    dataset) the server is a fork of this process, so it imports only what the harness did not;
    otherwise (the harness is multi-threaded: forking it is unsafe) a fresh interpreter, started
    by a thread that outlives the run (see `_keep`). `provider` is the run's --sandbox (default:
    the default provider): the server preloads what it declares."""
    global _keeper_thread
    from harness.sandbox.registry import DEFAULT
    from harness.settings import settings

    provider = provider or DEFAULT
    with _servers_lock:
        if agent in _servers:
            return _servers[agent]
        future: Future = Future()
        _servers[agent] = future
    if not settings().agent_fork:
        future.set_result(None)
    elif threading.current_thread() is threading.main_thread() and threading.active_count() == 1:
        try:
            future.set_result(Server(agent, _ForkedProcess(agent, provider)))
        except OSError as exc:
            log.warning("no fork server for agent %s (%s): agent processes start fresh", agent, exc)
            future.set_result(None)
    else:
        with _servers_lock:
            if _keeper_thread is None:
                _keeper_thread = threading.Thread(target=_keep, name="forkserver-keeper", daemon=True)
                _keeper_thread.start()
        _keeper.put((agent, provider, future))
    return future


def server_for(agent: str) -> Server | None:
    """This run's fork server for `agent` once it has loaded (started on first use), or None:
    disabled, failed or dead (the caller then starts a fresh process, as before)."""
    server = start(agent).result()
    if server is None or server.dead:
        return None
    try:
        server.ready.result(READY_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - it died or hangs: fresh processes still work
        with server._lock:
            warn, server.dead = not server.dead, True
        if warn:
            log.warning("no fork server for agent %s (%s): agent processes start fresh", agent,
                        exc or "not ready in time")
        return None
    return None if server.dead else server


def close_all() -> None:
    """End every fork server (their remaining children with them), loaded or still loading; the
    next run starts new ones."""
    with _servers_lock:
        futures = list(_servers.values())
        _servers.clear()
    for future in futures:
        if (server := future.result()) is not None:
            server.close()


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.stdin.fileno(), sys.stdout.buffer)
