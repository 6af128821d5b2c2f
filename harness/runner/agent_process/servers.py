"""The harness's side of the agents' fork server (forkserver.py is the server's): a run's servers, one
per agent name, held by a `ForkServers` object the run makes, starts and closes (runner/run.py).

`ForkServers.start` is the one way a server starts, once per agent name, without waiting for it to
load. From the main thread of a process with no other thread (`harness run` starts it before it
reads the dataset) the server is a fork of this process (`_ForkedProcess`), so it imports only what
the harness did not; otherwise (forking a multi-threaded process is unsafe) a fresh interpreter
(`Server.fresh`), started by a thread of the object's that outlives the run (PR_SET_PDEATHSIG fires
when the *thread* that started a process ends). `server_for` gives the loaded server or None
(disabled, failed, dead, or never started): the agent process then starts fresh (process.py `start`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future

from harness.runner.agent_process.forkserver import serve

log = logging.getLogger(__name__)
READY_TIMEOUT = 120  # seconds for a server to load; beyond it agent processes start fresh


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
    """One fork server for one agent name (`ForkServers.start`); `ready` resolves once it has loaded."""

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
            [sys.executable, "-m", "harness.runner.agent_process.forkserver", str(os.getpid()), agent, provider],
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


class ForkServers:
    """A run's fork servers: agent name -> the Future of its Server (None: disabled or failed)."""

    def __init__(self) -> None:
        self._servers: dict[str, Future] = {}
        self._lock = threading.Lock()
        self._keeper: queue.Queue[tuple] | None = None

    def start(self, agent: str, provider: str | None = None) -> Future:
        """Begin loading `agent`'s server (once: a second call gives the first one's Future) without
        waiting for it to load. `provider` is the run's --sandbox (default: the default provider): the
        server preloads what it declares."""
        from harness.sandbox.registry import DEFAULT
        from harness.settings import settings

        with self._lock:
            if agent in self._servers:
                return self._servers[agent]
            future: Future = Future()
            self._servers[agent] = future
        if not settings().agent_fork:
            future.set_result(None)
        elif threading.current_thread() is threading.main_thread() and threading.active_count() == 1:
            try:
                future.set_result(Server(agent, _ForkedProcess(agent, provider or DEFAULT)))
            except OSError as exc:
                log.warning("no fork server for agent %s (%s): agent processes start fresh", agent, exc)
                future.set_result(None)
        else:
            self._keeper_queue().put((agent, provider or DEFAULT, future))
        return future

    def _keeper_queue(self) -> queue.Queue[tuple]:
        """The queue of the thread that starts fresh servers (started on first use; it never ends)."""
        with self._lock:
            if self._keeper is None:
                self._keeper = queue.Queue()
                threading.Thread(target=_keep, args=(self._keeper,), name="forkserver-keeper", daemon=True).start()
            return self._keeper

    def server_for(self, agent: str) -> Server | None:
        """`agent`'s server once it has loaded, or None: never started, disabled, failed or dead (the
        caller then starts a fresh process)."""
        with self._lock:
            future = self._servers.get(agent)
        server = None if future is None else future.result()
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

    def close(self) -> None:
        """End every server (their remaining children with them), loaded or still loading; a later
        `start` starts a new one."""
        with self._lock:
            futures = list(self._servers.values())
            self._servers.clear()
        for future in futures:
            if (server := future.result()) is not None:
                server.close()


def _keep(requests: queue.Queue[tuple]) -> None:
    while True:
        agent, provider, future = requests.get()
        try:
            future.set_result(Server.fresh(agent, provider))
        except Exception as exc:  # noqa: BLE001 - fresh processes still work
            log.warning("no fork server for agent %s (%s): agent processes start fresh", agent, exc)
            future.set_result(None)
