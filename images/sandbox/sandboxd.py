"""sandboxd: the in-container service of a harness sandbox (stdlib only).

One small asyncio HTTP/1.1 server on one port. The harness talks to it instead of
`docker exec` because a request on a kept-alive connection costs ~1-9 ms where an
exec costs ~50 ms. Endpoints (JSON unless said otherwise):

  GET  /health                 -> {"ok": true}
  POST /exec    {argv, stdin? | stdin_b64?, timeout (null: none), cwd?, env?, max_output}
                               -> {exit_code, signal, stdout, stderr, timed_out, *_truncated, duration,
                                  started?} exit codes as a shell reports them: 126 cannot execute, 127
                                  not found or no such cwd, 128+N killed by signal N (137 on timeout);
                                  started is false (and only then present) when nothing ran
  POST /upload?dest=DIR        body: an uncompressed tar of regular files and dirs (<= MAX_BODY), read
                               in chunks and extracted as it arrives (never whole in memory); nothing
                               is written to DIR unless the whole archive is accepted
  GET  /file?path=P&max_bytes=N -> the file's bytes, streamed; refused when larger than N
  POST /end-processes          -> {"ended": N, "left": M}: SIGKILLs every process of the sandbox but this service
                                  (agent code's daemons included) and answers once none is left but zombies
                                  (`end_processes`): what a verdict taken next in the sandbox needs
  POST /browser/start          -> {"ws_path": "/devtools/browser/..."}: starts Chromium on first use
                                  (and again after a crash), DevTools on 127.0.0.1:9222 only
  /devtools/..., /json/...     -> forwarded byte for byte to Chromium's DevTools (WebSocket included),
                                  so the harness reaches the browser through this one published port

With HARNESS_SANDBOX_HANDOFF=PATH it serves a Unix socket the harness hands over at PATH instead
of the port (the harness's socket transport, for a sandbox with no network at all; `listen`).

Every request must carry the header X-Harness-Token equal to $HARNESS_SANDBOX_TOKEN; without
that variable the service refuses to start. A refusal is {"error": text, "code": CODE} with
CODE one of not_found, permission, is_a_directory, too_large, unsupported, bad_request, busy.

Connections are bounded, so that nothing that can reach the port (another sandbox on a shared
network, agent code inside) can use up this process's descriptors: a new connection must send
its first request's head within FIRST_REQUEST_TIMEOUT_S; connections that have not yet shown
the token are capped at MAX_UNAUTHENTICATED (beyond it the oldest of them is closed at once),
those that have at MAX_AUTHENTICATED (beyond it the least recently used idle one is closed,
or, when all are busy, the newcomer is answered 503 `busy`), and an authenticated connection
may stay idle between requests for IDLE_TIMEOUT_S. Running out of descriptors while accepting
(EMFILE) sheds the oldest unauthenticated connection and goes on accepting.
A command runs in its own session; on timeout the whole process tree (session,
process group, every descendant found in /proc, and every process whose environment
carries the command's HARNESS_COMMAND_TAG, e.g. a daemon that double-forked out of the
tree) is SIGKILLed, and the answer waits until those processes are gone and reaped (up to
KILL_WAIT_S), so that the next command finds the pids limit free again. A command ends when
its main process does: background children that still hold its stdout/stderr get
PIPE_GRACE_S, then their further output is read and dropped. Commands run at niceness
COMMAND_NICE, so agent code that keeps every CPU busy cannot starve the service.

sandboxd is the container's PID 1, and so its init: the kernel ignores signals
sent to PID 1 from inside its namespace unless it handles them, so agent code
(`kill -9 -1`, `pkill python3`) cannot take the service, and the sandbox, down.
As init it also reaps the orphans that end up as its children.
"""

from __future__ import annotations

import array
import asyncio
import base64
import ctypes
import errno
import hmac
import io
import json
import os
import pwd
import resource
import secrets
import shutil
import signal
import socket
import stat
import sys
import tarfile
import tempfile
import time
import urllib.parse


def _take_token() -> str:
    """The token, removed from the environment commands inherit and wiped from this process's
    memory: popping it alone leaves it readable by agent code in /proc/1/environ. The string
    itself stays in memory (every request's header carries it too): see _seal_memory."""
    address = None
    try:
        getenv = ctypes.CDLL(None).getenv
        getenv.restype = ctypes.c_void_p
        address = getenv(b"HARNESS_SANDBOX_TOKEN")
    except (OSError, AttributeError):  # no libc to ask: the pop below still keeps it from commands
        pass
    token = os.environ.pop("HARNESS_SANDBOX_TOKEN", "")
    if address:
        ctypes.memset(address, 0, len(ctypes.string_at(address)))
    return token


PORT = int(os.environ.get("HARNESS_SANDBOX_PORT", "8765"))
TOKEN = _take_token()
MAX_BODY = 512 * 1024 * 1024
USER = pwd.getpwuid(os.getuid()).pw_name  # the only user commands can run as (no capabilities to switch)
# Output kept per stream of one command, whatever a request asks for: what is kept is held
# in this process's memory, and this process must survive its agent.
MAX_OUTPUT_CAP = 64 * 1024 * 1024
# Connections (see the module's docstring). A new connection has this long to send its first
# request's head: the harness sends it at once, a silent or trickling stranger is dropped.
FIRST_REQUEST_TIMEOUT_S = 5.0
# An authenticated connection stays alive this long between requests (an agent may think for
# minutes between two commands); idle ones beyond the cap are closed first anyway.
IDLE_TIMEOUT_S = 3600.0
# Connections not yet authenticated, and authenticated ones (the harness keeps a few per
# process, plus one per browser connection, which holds two descriptors). Both are also kept
# within the process's descriptor limit, minus FD_RESERVE for commands' pipes and the like.
MAX_UNAUTHENTICATED = 256
MAX_AUTHENTICATED = 256
FD_RESERVE = 128
ACCEPT_BACKOFF_S = 0.05  # after accept() failed for want of descriptors (some were just freed)
LISTEN_BACKLOG = 1024  # connections the kernel queues before we accept them (no descriptor each)
# A request body (an upload) that stops arriving for this long is given up.
BODY_READ_TIMEOUT_S = 300.0
# Commands running at once. Each costs a child-watcher thread and counts against the
# sandbox's pids limit (with Chromium's ~200 threads); beyond this they queue.
MAX_PARALLEL_COMMANDS = 32
# After the command's main process exits, background children may still hold its
# pipes open; wait this long for EOF, then answer with what was read.
PIPE_GRACE_S = 0.2
# Set to a fresh value in each command's environment: on timeout, processes that left the
# command's tree (a double fork, `setsid -f`) are still found by it and killed.
COMMAND_TAG_VAR = "HARNESS_COMMAND_TAG"
# A timed-out command is answered only once its processes are gone, zombies included (as init
# this process reaps them): a fork bomb's fill the pids limit, and until they are freed the next
# command cannot start. Waited for at most this long; what is still there then is said.
KILL_WAIT_S = 10.0
# Commands (and Chromium) run at this niceness, this process at 0: raising one's own needs no
# capability, lowering it again needs one no sandbox has. However many processes agent code keeps
# busy, this service keeps the CPU it needs to answer and to kill a timed-out command in time.
COMMAND_NICE = 19


CDP_PORT = 9222
CHROMIUM = os.environ.get("HARNESS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox",  # the container is the sandbox (no user namespaces in it)
    "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-quic", "--disable-features=Translate,MediaRouter", "--mute-audio",
    f"--remote-debugging-port={CDP_PORT}", "--remote-debugging-address=127.0.0.1",
    "--user-data-dir=/tmp/harness-chromium", "--window-size=1280,1024", "about:blank",
]
# Flags the harness adds for a run, from the container's environment (HARNESS_BROWSER_FLAGS, split on
# spaces): the run's web proxy and its CA's key hash (harness/sandbox/docker/webproxy.py).
BROWSER_EXTRA_FLAGS = os.environ.get("HARNESS_BROWSER_FLAGS", "").split()
_browser: dict = {}


class HttpError(Exception):
    def __init__(self, status: int, message: str, code: str = "bad_request"):
        super().__init__(message)
        self.status, self.code = status, code


def os_error(exc: OSError, what: str) -> HttpError:
    """The typed refusal for an OSError met while serving a request."""
    if isinstance(exc, FileNotFoundError):
        return HttpError(404, f"no such file or directory: {what}", "not_found")
    if isinstance(exc, PermissionError):
        return HttpError(403, f"permission denied: {what}", "permission")
    if isinstance(exc, IsADirectoryError):
        return HttpError(400, f"is a directory: {what}", "is_a_directory")
    return HttpError(400, f"{what}: {exc.strerror or exc}", "bad_request")


# --------------------------------------------------------------------- processes
def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, pgid, sid) for every process we can see."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def _tagged(table: dict, tag: str) -> set[int]:
    """The processes whose environment carries COMMAND_TAG_VAR=tag."""
    needle = f"{COMMAND_TAG_VAR}={tag}".encode()
    found = set()
    for pid in table:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.add(pid)
        except OSError:
            continue
    return found


def _members(table: dict, root: int, tag: str | None, with_root: bool = True) -> set[int]:
    """The processes of a command's tree in table: root (unless it is reaped: with_root=False,
    its pid may be another's now), its session and process group, their descendants, and with a
    tag every process whose environment carries it (daemons that left the tree). Never this process."""
    doomed = {pid for pid, (_, pgid, sid) in table.items() if (sid == root or pgid == root) and pid != root}
    if with_root and root in table:
        doomed.add(root)
    if tag:
        doomed |= _tagged(table, tag)
    frontier = list(doomed)
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _, _) in table.items():
            if ppid == parent and pid not in doomed:
                doomed.add(pid)
                frontier.append(pid)
    doomed.discard(os.getpid())
    return doomed


def _signal(pids, sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def kill_tree(root: int, tag: str | None = None, with_root: bool = True) -> None:
    """SIGKILL root, its session, its process group and all its descendants, and with a tag,
    every process whose environment carries it (daemons that left the tree). The tree is stopped
    first (SIGSTOP, passes until no new one shows up): a stopped process neither forks into the
    pid slots the kill frees (a fork bomb refills them) nor competes for the CPU meanwhile, and
    its environment can be read (a process forking holds the lock that reading it takes)."""
    stopped: set[int] = set()
    for _ in range(5):
        fresh = _members(_proc_table(), root, None, with_root) - stopped
        if not fresh:
            break
        _signal(fresh, signal.SIGSTOP)
        stopped |= fresh
    _signal(_members(_proc_table(), root, tag, with_root), signal.SIGKILL)


async def kill_and_wait(proc: asyncio.subprocess.Process, tag: str, limit: float = KILL_WAIT_S) -> int:
    """Kill a command's tree and wait until none of its processes is left, zombies included
    (as init, reaping those that become ours), killing again what forked meanwhile; at most
    `limit` seconds. Returns how many were still there then (0: their pid slots are free)."""
    deadline = time.monotonic() + limit
    kill_tree(proc.pid, tag)
    await proc.exited  # asyncio's watcher reaps the main process itself
    while True:
        left = _members(_proc_table(), proc.pid, tag, with_root=False)
        if not left or time.monotonic() > deadline:
            return len(left)
        kill_tree(proc.pid, tag, with_root=False)
        if os.getpid() == 1:
            reap_orphans()
        await asyncio.sleep(0.02)


def _living(me: int) -> set[int]:
    """Every process this one can see but itself and PID 1 (itself, or an init before it) that is not a zombie."""
    found = set()
    for pid in _proc_table():
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                state = fh.read().decode(errors="replace").rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if pid not in (me, 1) and state not in ("Z", "X"):
            found.add(pid)
    return found


async def end_processes(limit: float = KILL_WAIT_S) -> dict:
    """SIGKILL every process of the sandbox but this one, again and again (what forked meanwhile too) until none
    is left alive, at most `limit` seconds: kill(-1) reaches every process this uid may signal (in the sandbox's
    pid namespace, all but this one: commands cannot become another user), and a process found alive after it is
    killed by its pid. As init, this process reaps what it inherits. Returns how many were ended and how many
    were still alive at the end (0: nothing of agent code runs any more, so nothing it started can write)."""
    me, ended = os.getpid(), set()
    deadline = time.monotonic() + limit
    while True:
        alive = _living(me)
        ended |= alive
        if not alive or time.monotonic() > deadline:
            return {"ended": len(ended), "left": len(alive)}
        try:
            os.kill(-1, signal.SIGKILL)  # never this process (nor PID 1)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:  # gone meanwhile, or (it cannot be, but then it is counted as left) not ours to signal
                pass
        if me == 1:
            reap_orphans()
        await asyncio.sleep(0.02)


async def _drain(stream: asyncio.StreamReader, cap: int, sink: dict) -> None:
    """Read a pipe to EOF, keeping its first cap bytes (none once sink["discard"] is set)."""
    sink["buf"], sink["total"] = bytearray(), 0
    while chunk := await stream.read(65536):
        sink["total"] += len(chunk)
        room = cap - len(sink["buf"])
        if room > 0 and not sink.get("discard"):
            sink["buf"] += chunk[:room]


def _render(sink: dict, cap: int) -> tuple[str, bool]:
    buf, total = sink.get("buf", b""), sink.get("total", 0)
    text = bytes(buf).decode("utf-8", errors="replace")
    if total > cap:
        text += f"\n[... output truncated: {total - cap} more bytes not shown ...]"
        return text, True
    return text, False


_command_slots: asyncio.Semaphore | None = None
_draining: set[asyncio.Task] = set()  # readers of pipes a command's background children still hold


async def run_command(req: dict) -> dict:
    global _command_slots
    if _command_slots is None:
        _command_slots = asyncio.Semaphore(MAX_PARALLEL_COMMANDS)
    async with _command_slots:
        return await _run_command(req)


def _field(req: dict, key: str, parse, default=None):
    """req[key] parsed, or default when absent/null; a value that does not parse is a 400."""
    value = req.get(key)
    if value is None:
        return default
    try:
        return parse(value)
    except (TypeError, ValueError, AttributeError) as exc:
        raise HttpError(400, f"bad {key}: {value!r} ({exc})") from None


async def _run_command(req: dict) -> dict:
    if not isinstance(req, dict):
        raise HttpError(400, "the body must be a JSON object")
    argv = req.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise HttpError(400, "argv must be a non-empty list of strings")
    if req.get("user") not in (None, "", USER):
        raise HttpError(400, f"commands run as {USER}; running as {req.get('user')!r} is not supported",
                        "unsupported")
    timeout = _field(req, "timeout", float)
    cap = max(0, min(_field(req, "max_output", int, 1024 * 1024), MAX_OUTPUT_CAP))
    env = dict(os.environ)
    env.update(_field(req, "env", lambda e: {str(k): str(v) for k, v in e.items()}, {}))
    stdin_data = req.get("stdin")
    if req.get("stdin_b64") is not None:
        stdin_data = _field(req, "stdin_b64", lambda v: base64.b64decode(v, validate=True))
    elif stdin_data is not None:
        stdin_data = str(stdin_data).encode()
    cwd = req.get("cwd") or "/workspace"
    if not isinstance(cwd, str):
        raise HttpError(400, f"bad cwd: {cwd!r}")
    tag = secrets.token_hex(8)
    env[COMMAND_TAG_VAR] = tag
    started = time.monotonic()
    if not os.path.isdir(cwd):
        return _not_started(127, f"cannot run {argv[0]}: no such working directory: {cwd}")
    try:
        proc = await spawn(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin_data is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
    except (FileNotFoundError, NotADirectoryError) as exc:
        return _not_started(127, f"{argv[0]}: command not found ({exc.strerror or exc})")
    except PermissionError as exc:
        return _not_started(126, f"{argv[0]}: cannot execute ({exc.strerror or exc})")
    except (OSError, RuntimeError) as exc:
        return _not_started(126, _cannot_start(argv[0], exc))
    out, err = {}, {}
    readers = [asyncio.ensure_future(_drain(proc.stdout, cap, out)),
               asyncio.ensure_future(_drain(proc.stderr, cap, err))]
    feeder = asyncio.ensure_future(_feed(proc.stdin, stdin_data)) if stdin_data is not None else None
    timed_out, left = False, 0
    try:
        # The deadline covers writing stdin too: a command that never reads it must not hang us.
        # `exited`, not proc.wait(): that also waits for background children to close the pipes.
        await asyncio.wait_for(asyncio.shield(proc.exited), timeout)  # None: no limit
    except TimeoutError:
        timed_out = True
        left = await kill_and_wait(proc, tag)
    if feeder is not None:
        if not feeder.done():  # the process is gone; what it did not read is dropped
            feeder.cancel()
            proc.stdin.close()
        await asyncio.gather(feeder, return_exceptions=True)
    _, pending = await asyncio.wait(readers, timeout=PIPE_GRACE_S)
    stdout, out_trunc = _render(out, cap)
    stderr, err_trunc = _render(err, cap)
    for sink in (out, err):
        sink["discard"], sink["buf"] = True, bytearray()
    for task in pending:  # keep reading (and dropping) so a background writer never blocks on a full pipe
        _draining.add(task)
        task.add_done_callback(_draining.discard)
    code = proc.returncode
    if code in (126, 127) and CHOOM and not stdout and stderr.startswith(f"{CHOOM_FAILED}{argv[0]}: "):
        # The command never ran: say so as a shell would, without naming the wrapper.
        reason = stderr[len(CHOOM_FAILED) + len(argv[0]) + 2:].strip()
        return _not_started(code, f"{argv[0]}: command not found ({reason})" if code == 127
                            else f"{argv[0]}: cannot execute ({reason})")
    if left:
        stderr += (f"\n[sandboxd: {left} of the command's processes were still there {KILL_WAIT_S:.0f}s after it "
                   "was killed]\n")
    sig = -code if code < 0 else None  # asyncio reports a signal death as -N; a shell says 128+N
    return {"exit_code": 128 + sig if sig else code, "signal": sig, "stdout": stdout, "stderr": stderr,
            "timed_out": timed_out, "stdout_truncated": out_trunc,
            "stderr_truncated": err_trunc, "duration": time.monotonic() - started}


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    try:
        pipe.write(data)
        await pipe.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    pipe.close()


def _cannot_start(name: str, exc: OSError | RuntimeError) -> str:
    """Why a command did not start, in words the agent can act on. A full pids limit shows as a fork's
    EAGAIN or, when the child watcher's thread is what could not start, as a RuntimeError: one cause."""
    if isinstance(exc, RuntimeError) or exc.errno == errno.EAGAIN:
        return f"{name}: cannot start: the sandbox's process limit is reached ({exc})"
    return f"{name}: cannot start ({exc})"


def _not_started(code: int, message: str) -> dict:
    return {"exit_code": code, "signal": None, "stdout": "", "stderr": message + "\n", "timed_out": False,
            "stdout_truncated": False, "stderr_truncated": False, "duration": 0.0, "started": False}


# --------------------------------------------------------------------- init duties
_spawned: set[int] = set()  # our own children: asyncio's child watcher waits for these
_zombie_seen: dict[int, int] = {}


def reap_orphans() -> None:
    """Reap zombies that were reparented to us, never the children asyncio waits for.

    Our own children are session leaders (start_new_session); an orphan that is not a
    session leader is reaped at once, one that is (it called setsid) once it has stayed
    a zombie for two passes without being ours.
    """
    table = _proc_table()
    me = os.getpid()
    for pid, (ppid, _, sid) in table.items():
        if ppid != me or pid in _spawned:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                state = fh.read().decode(errors="replace").rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            continue
        _zombie_seen[pid] = _zombie_seen.get(pid, 0) + 1
        if pid != sid or _zombie_seen[pid] >= 2:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            _zombie_seen.pop(pid, None)


async def init_loop() -> None:
    while True:
        await asyncio.sleep(1.0)
        reap_orphans()


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's own protocol, plus `exited`: done when the process ends, even while children
    it left in the background still hold its pipes (Process.wait() waits for those too)."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop):
        super().__init__(limit=limit, loop=loop)
        self.exited = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


# The kernel's OOM killer must take the agent's processes, never this one (a sandbox out of
# memory would otherwise lose its service, the largest process, to a swarm of small hogs):
# everything we start runs with the highest oom_score_adj. Raising one's own needs no
# capability; util-linux's choom sets it and then execs the command, so even what the command
# forks at once inherits it. Without choom it is written for the child right after it starts.
OOM_SCORE_ADJ = 1000
CHOOM = next((p for p in ("/usr/bin/choom", "/bin/choom") if os.access(p, os.X_OK)), None)
CHOOM_FAILED = "choom: failed to execute "  # choom's own words when the command cannot be executed


async def spawn(*argv: str, **kwargs) -> asyncio.subprocess.Process:
    """Start argv in a session of its own, first in line for the OOM killer, at COMMAND_NICE;
    the Process gets an `exited` future."""
    loop = asyncio.get_running_loop()
    wrap = [CHOOM, "-n", str(OOM_SCORE_ADJ), "--"] if CHOOM else []
    transport, protocol = await loop.subprocess_exec(lambda: _Protocol(2**16, loop), *wrap, *argv,
                                                     start_new_session=True, **kwargs)
    proc = asyncio.subprocess.Process(transport, protocol, loop)
    if not CHOOM:
        try:
            with open(f"/proc/{proc.pid}/oom_score_adj", "w") as fh:
                fh.write(str(OOM_SCORE_ADJ))
        except OSError:
            pass
    try:  # the whole group: what the command forked before this line is in it
        os.setpriority(os.PRIO_PGRP, proc.pid, COMMAND_NICE)
    except OSError:
        pass
    proc.exited = protocol.exited
    _spawned.add(proc.pid)
    proc.exited.add_done_callback(lambda _: _spawned.discard(proc.pid))
    return proc


# --------------------------------------------------------------------- files
def _inside(base: str, path: str) -> bool:
    return os.path.commonpath([base, path]) == base


class BodyBroken(Exception):
    """The request body stopped short (the client went away or stalled): drop the connection."""


class RequestBody:
    """A request body read as it is used, never whole in memory; `left` bytes are still unread."""

    def __init__(self, reader: asyncio.StreamReader, length: int):
        self.reader, self.left = reader, length

    async def read(self, n: int) -> bytes:
        n = min(n, self.left)
        if n <= 0:
            return b""
        try:
            data = await asyncio.wait_for(self.reader.readexactly(n), BODY_READ_TIMEOUT_S)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            raise BodyBroken(f"the request body stopped with {self.left} bytes left") from exc
        self.left -= len(data)
        return data

    async def drain(self) -> None:
        """Read and drop what is left (the connection can then serve its next request)."""
        while self.left > 0:
            await self.read(1 << 20)


class _BodyFile:
    """A RequestBody as a blocking file, for a worker thread (tarfile); reads go through the loop."""

    def __init__(self, body: RequestBody, loop: asyncio.AbstractEventLoop):
        self.body, self.loop = body, loop

    def read(self, n: int = -1) -> bytes:
        n = self.body.left if n is None or n < 0 else n
        return asyncio.run_coroutine_threadsafe(self.body.read(min(n, 1 << 20)), self.loop).result()


async def upload(body, dest: str) -> dict:
    """Extract a tar body (bytes, or a RequestBody streamed through a worker thread) into dest."""
    if isinstance(body, RequestBody):
        return await asyncio.to_thread(extract_upload, _BodyFile(body, asyncio.get_running_loop()), dest)
    return extract_upload(io.BytesIO(body), dest)


def extract_upload(source, dest: str) -> dict:
    try:
        return _extract(source, dest)
    except tarfile.TarError as exc:
        raise HttpError(400, f"not a tar archive: {exc}") from None
    except OSError as exc:
        raise os_error(exc, exc.filename or dest) from None


def _extract(source, dest: str) -> dict:
    """Stage every member in a fresh folder inside dest as the archive streams in (on dest's own
    file system: no second copy of the data, no memory), check them all, then move them into place."""
    dest = os.path.realpath(dest)
    if not _inside("/workspace", dest) and not _inside("/tmp", dest):
        raise HttpError(400, f"upload destination {dest} is outside /workspace and /tmp")
    made, parent = None, dest  # the outermost folder of dest that this upload creates
    while not os.path.lexists(parent):
        made, parent = parent, os.path.dirname(parent)
    os.makedirs(dest, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".harness-upload-", dir=dest)
    try:
        members = _stage(source, dest, staging)
        _commit(members, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        folder = dest
        while made is not None:  # a refused upload leaves no folder of its own behind
            try:
                os.rmdir(folder)  # only when still empty
            except OSError:
                break
            if folder == made:
                break
            folder = os.path.dirname(folder)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return {"written": [raw for raw, _, staged in members if staged is not None]}


def _stage(source, dest: str, staging: str) -> list[tuple[str, str, str | None]]:
    """(member name, normalized name, staged file or None for a folder) of each member, in order."""
    members = []
    with tarfile.open(fileobj=source, mode="r|", bufsize=1 << 20) as tar:
        for m in tar:
            name = os.path.normpath(m.name)
            if os.path.isabs(m.name) or name.startswith("..") or not (m.isfile() or m.isdir()):
                raise HttpError(400, f"refused archive member {m.name!r}")
            if not _inside(dest, os.path.realpath(os.path.join(dest, name))):
                raise HttpError(400, f"refused archive member {m.name!r} (escapes {dest})")
            if m.isdir():
                members.append((m.name, name, None))
                continue
            staged = os.path.join(staging, str(len(members)))
            src = tar.extractfile(m)
            with open(staged, "xb") as fh:
                while chunk := src.read(1 << 20):
                    fh.write(chunk)
            members.append((m.name, name, staged))
    return members


def _may_write(target: str, exists: bool) -> bool:
    """Whether the agent's own code could write target: an existing file needs its write bit
    (a `chmod -w` holds against copy_in as against `echo >`), a new one a writable folder (the
    nearest one that exists: the folders in between are made in it). The rename that puts a
    staged file in place would ignore the file's mode, so it is asked first."""
    if exists:
        return os.access(target, os.W_OK)
    folder = os.path.dirname(target)
    while not os.path.lexists(folder):
        folder = os.path.dirname(folder)
    return os.access(folder, os.W_OK | os.X_OK)


def _commit(members: list[tuple[str, str, str | None]], dest: str) -> None:
    targets = []
    for raw, name, staged in members:  # check every target before moving anything
        target = os.path.realpath(os.path.join(dest, name))
        if not _inside(dest, target):
            raise HttpError(400, f"refused archive member {raw!r} (escapes {dest})")
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            mode = None
        except NotADirectoryError:
            raise HttpError(400, f"refused archive member {raw!r}: a parent of {target} is a file") from None
        if mode is not None and staged is None and not stat.S_ISDIR(mode):
            raise HttpError(400, f"refused archive member {raw!r}: {target} exists and is not a folder")
        if mode is not None and staged is not None and stat.S_ISDIR(mode):
            raise os_error(IsADirectoryError(), target)
        if mode is not None and staged is not None and not stat.S_ISREG(mode):
            raise HttpError(400, f"refused archive member {raw!r}: {target} is not a regular file")
        if staged is not None and not _may_write(target, mode is not None):
            raise os_error(PermissionError(), target)
        targets.append((target, staged))
    for target, staged in targets:
        if staged is None:
            os.makedirs(target, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            os.replace(staged, target)
        except OSError as exc:
            if exc.errno != errno.EXDEV:  # a mount point inside dest: copy across instead
                raise
            shutil.move(staged, target)


class FileBody:
    """A file answered in chunks (never whole in memory): an open regular file and its size."""

    def __init__(self, path: str, max_bytes: int):
        try:
            # O_NONBLOCK: opening a FIFO must not wait for a writer (this runs on the event loop);
            # it changes nothing for the regular files that are served.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise os_error(exc, path) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            if stat.S_ISDIR(info.st_mode):
                raise os_error(IsADirectoryError(), path)
            raise HttpError(400, f"not a regular file: {path}")
        fh = os.fdopen(fd, "rb")
        if info.st_size > max_bytes:
            fh.close()
            raise HttpError(413, f"{path} has {info.st_size} bytes, more than the {max_bytes} asked for",
                            "too_large")
        self.fh, self.size = fh, info.st_size

    async def write_to(self, writer: asyncio.StreamWriter) -> None:
        left = self.size
        try:
            while left > 0:
                chunk = await asyncio.to_thread(self.fh.read, min(1 << 20, left))
                if not chunk:  # the file shrank: the client sees a short body and fails
                    break
                writer.write(chunk)
                await writer.drain()
                left -= len(chunk)
        finally:
            self.fh.close()


# --------------------------------------------------------------------- browser
async def _devtools_version() -> dict | None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", CDP_PORT)
    except OSError:
        return None
    try:
        writer.write(b"GET /json/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        return json.loads(await asyncio.wait_for(reader.readexactly(length), 5))
    except (TimeoutError, OSError, ValueError, IndexError, asyncio.IncompleteReadError):
        return None
    finally:
        writer.close()


BROWSER_START_S = 30.0  # a client that names no timeout (the harness sends its setting)
BROWSER_START_CAP_S = 600.0


async def start_browser(timeout: float = BROWSER_START_S, force: bool = False) -> dict:
    """Start Chromium unless it runs; a crashed one (or, with force, a stuck one) is started again."""
    lock = _browser.setdefault("lock", asyncio.Lock())
    async with lock:
        proc = _browser.get("proc")
        if force and proc is not None and proc.returncode is None:
            kill_tree(proc.pid)
            await proc.wait()
        if proc is not None and proc.returncode is None:
            info = await _devtools_version()
            if info:
                return {"ws_path": urllib.parse.urlsplit(info["webSocketDebuggerUrl"]).path, "restarted": False}
            kill_tree(proc.pid)
        restarted = proc is not None
        _browser["proc"] = await spawn(
            CHROMIUM, *BROWSER_EXTRA_FLAGS, *CHROMIUM_FLAGS, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = await _devtools_version()
            if info:
                ws = urllib.parse.urlsplit(info["webSocketDebuggerUrl"]).path
                return {"ws_path": ws, "restarted": restarted}
            if _browser["proc"].returncode is not None:
                raise HttpError(500, f"chromium exited with {_browser['proc'].returncode}")
            await asyncio.sleep(0.05)
        raise HttpError(504, f"chromium did not answer within {timeout:.0f}s")


async def forward(head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Splice this connection to Chromium's DevTools, rewriting Host (DevTools insists on an IP)."""
    try:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", CDP_PORT)
    except OSError:
        writer.write(b"HTTP/1.1 502 X\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        return
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith((b"host:", b"connection:"))]
    upgrade = any(line.lower().startswith(b"upgrade:") for line in lines)
    # Plain /json requests: one per connection, so no later request reaches Chromium unchecked.
    extra = [b"Host: 127.0.0.1:%d" % CDP_PORT, b"Connection: Upgrade" if upgrade else b"Connection: close"]
    up_writer.write(b"\r\n".join(lines[:1] + extra + lines[1:]))

    async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while chunk := await src.read(65536):
                dst.write(chunk)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()  # half-close: let the other side still answer
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            dst.close()

    await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
    up_writer.close()


# --------------------------------------------------------------------- http
async def dispatch(method: str, target: str, body) -> tuple[int, bytes, str]:
    """Serve one request; body is bytes, or for an upload a RequestBody still to be read."""
    url = urllib.parse.urlsplit(target)
    query = dict(urllib.parse.parse_qsl(url.query))
    if method == "GET" and url.path == "/health":
        return 200, b'{"ok": true}', "application/json"
    if method == "POST" and url.path == "/exec":
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            raise HttpError(400, "the body is not JSON") from None
        result = await run_command(request)
        return 200, json.dumps(result).encode(), "application/json"
    if method == "POST" and url.path == "/upload":
        result = await upload(body, query.get("dest", "/workspace"))
        return 200, json.dumps(result).encode(), "application/json"
    if method == "GET" and url.path == "/file":
        max_bytes = _field(query, "max_bytes", int, 64 * 1024 * 1024)
        return 200, FileBody(query.get("path", ""), max_bytes), "application/octet-stream"
    if method == "POST" and url.path == "/end-processes":
        return 200, json.dumps(await end_processes()).encode(), "application/json"
    if method == "POST" and url.path == "/browser/start":
        force = query.get("force") == "1"
        timeout = min(max(_field(query, "timeout", float, BROWSER_START_S), 1.0), BROWSER_START_CAP_S)
        return 200, json.dumps(await start_browser(timeout, force=force)).encode(), "application/json"
    raise HttpError(404, f"no route {method} {url.path}")


_UNAUTHORIZED_BODY = b'{"error": "bad or missing X-Harness-Token"}'
_UNAUTHORIZED = (b"HTTP/1.1 401 X\r\nContent-Type: application/json\r\nConnection: close\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(_UNAUTHORIZED_BODY)) + _UNAUTHORIZED_BODY


def authorized(headers: dict) -> bool:
    return bool(TOKEN) and hmac.compare_digest(headers.get("x-harness-token", "").encode(), TOKEN.encode())


# --------------------------------------------------------------------- connections
class _Conn:
    __slots__ = ("writer", "authed", "busy")

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer, self.authed, self.busy = writer, False, False


_unauthenticated: dict[_Conn, None] = {}  # oldest first
_authenticated: dict[_Conn, None] = {}  # least recently used first


def _caps() -> tuple[int, int]:
    """(unauthenticated, authenticated) connection caps, within this process's descriptor limit
    (read each time: it can change under us)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return MAX_UNAUTHENTICATED, MAX_AUTHENTICATED
    room = max(4, (soft - FD_RESERVE) // 4)
    return min(MAX_UNAUTHENTICATED, room), min(MAX_AUTHENTICATED, room)


def _drop(conn: _Conn) -> None:
    """Close a connection at once (its handler then sees EOF and ends)."""
    _unauthenticated.pop(conn, None)
    _authenticated.pop(conn, None)
    conn.writer.close()


def _admit(conn: _Conn) -> None:
    """A new connection; over the cap, the one that has waited longest without a request goes."""
    cap = _caps()[0]
    while len(_unauthenticated) >= cap:
        _drop(next(iter(_unauthenticated)))
    _unauthenticated[conn] = None


def _authenticate(conn: _Conn) -> bool:
    """The connection showed the token. Over the cap the least recently used idle authenticated
    connection is closed; False when every one of them is busy (the newcomer is refused)."""
    _unauthenticated.pop(conn, None)
    cap = _caps()[1]
    while len(_authenticated) >= cap:
        idle = next((c for c in _authenticated if not c.busy), None)
        if idle is None:
            return False
        _drop(idle)
    conn.authed = True
    _authenticated[conn] = None
    return True


def _forget(conn: _Conn) -> None:
    _unauthenticated.pop(conn, None)
    _authenticated.pop(conn, None)


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    conn = _Conn(writer)
    _admit(conn)
    try:
        while True:
            try:
                # A new connection must ask at once; a known one may idle between requests.
                timeout = IDLE_TIMEOUT_S if conn.authed else FIRST_REQUEST_TIMEOUT_S
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
            except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            try:
                method, target, _ = lines[0].split(" ", 2)
            except ValueError:
                return
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    key, value = line.split(":", 1)
                    headers[key.strip().lower()] = value.strip()
            if not authorized(headers):  # before reading any body: strangers get nothing buffered
                writer.write(_UNAUTHORIZED)
                await writer.drain()
                return
            if not conn.authed and not _authenticate(conn):
                error = HttpError(503, "too many connections to the sandbox service, all busy", "busy")
                await respond(writer, error.status, _error_body(error), "application/json", close=True)
                return
            conn.busy = True
            if target.startswith(("/devtools/", "/json")):
                await forward(head, reader, writer)  # busy for its whole life
                return
            raw_length = headers.get("content-length", "0")
            if not (raw_length.isascii() and raw_length.isdigit()):  # unknown framing: refuse, then drop
                error = HttpError(400, f"bad Content-Length: {raw_length!r}")
                await respond(writer, error.status, _error_body(error), "application/json", close=True)
                return
            length = int(raw_length)
            if length > MAX_BODY:  # refuse without reading it, then drop the connection
                error = HttpError(413, f"request body of {length} bytes is over the limit of {MAX_BODY}",
                                  "too_large")
                await respond(writer, error.status, _error_body(error), "application/json", close=True)
                return
            if method == "POST" and urllib.parse.urlsplit(target).path == "/upload":
                body = RequestBody(reader, length)  # streamed into the archive's extraction
            else:
                body = await reader.readexactly(length) if length else b""
            try:
                status, payload, ctype = await dispatch(method, target, body)
            except BodyBroken:
                return
            except HttpError as exc:
                status, payload, ctype = exc.status, _error_body(exc), "application/json"
            except Exception as exc:  # report, keep serving
                status = 500
                payload = json.dumps({"error": f"{type(exc).__name__}: {exc}", "code": "internal"}).encode()
                ctype = "application/json"
            if isinstance(body, RequestBody):
                await body.drain()  # what a refused upload still sends (and a tar's trailing padding)
            await respond(writer, status, payload, ctype)
            conn.busy = False
            if conn in _authenticated:  # now the most recently used
                del _authenticated[conn]
                _authenticated[conn] = None
    except (ConnectionError, asyncio.IncompleteReadError, BodyBroken):
        pass
    finally:
        _forget(conn)
        writer.close()


_clients: set[asyncio.Task] = set()
_last_shed_report = 0.0


async def _serve_client(client: socket.socket) -> None:
    try:
        reader, writer = await asyncio.open_connection(sock=client)
    except OSError:
        client.close()
        return
    await handle(reader, writer)


def _out_of_descriptors(exc: OSError) -> bool:
    """accept() failed for want of descriptors: shed the oldest unauthenticated connection
    (True), if there is one."""
    global _last_shed_report
    shed = bool(_unauthenticated)
    if shed:
        _drop(next(iter(_unauthenticated)))
    now = time.monotonic()
    if now - _last_shed_report > 10:
        _last_shed_report = now
        print(f"sandboxd: accept: {exc.strerror or exc} ({len(_unauthenticated)} unauthenticated, "
              f"{len(_authenticated)} authenticated connections left)", file=sys.stderr, flush=True)
    return shed


async def serve(sock: socket.socket) -> None:
    """Accept connections on a listening socket for ever; no accept error ends or stalls it."""
    loop = asyncio.get_running_loop()
    sock.setblocking(False)
    while True:
        try:
            client, _ = await loop.sock_accept(sock)
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                # A shed connection's descriptor is freed on the loop's next turn; with nothing
                # to shed, wait a little for a command or a connection to end.
                await asyncio.sleep(0 if _out_of_descriptors(exc) else ACCEPT_BACKOFF_S)
            else:  # e.g. ECONNABORTED: that client is gone already
                await asyncio.sleep(0)
            continue
        task = asyncio.ensure_future(_serve_client(client))
        _clients.add(task)
        task.add_done_callback(_clients.discard)
        # Let it reach _admit before the next accept: awaiting sock_accept does not yield while
        # connections are queued, and unadmitted connections escape the caps.
        await asyncio.sleep(0)


def _error_body(exc: HttpError) -> bytes:
    return json.dumps({"error": str(exc), "code": exc.code}).encode()


async def respond(writer: asyncio.StreamWriter, status: int, payload, ctype: str, *, close: bool = False) -> None:
    size = payload.size if isinstance(payload, FileBody) else len(payload)
    head = (f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {size}\r\n"
            + ("Connection: close\r\n" if close else "") + "\r\n").encode()
    if isinstance(payload, FileBody):
        writer.write(head)
        await payload.write_to(writer)
    else:
        writer.write(head + payload)
    await writer.drain()


PR_SET_DUMPABLE = 4  # <linux/prctl.h>


def _seal_memory() -> None:
    """Make this process non-dumpable before any command runs. Agent code runs under the same
    uid, and could otherwise read the token out of /proc/1/mem (or ptrace PID 1). A non-dumpable
    process's /proc files belong to root and tracing it needs CAP_SYS_PTRACE, which no sandbox
    has; the commands it starts are dumpable again (exec resets the flag), so nothing of theirs
    changes. Refuses to serve when the flag cannot be set."""
    try:
        done = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        done = False
    if not done:
        raise SystemExit("sandboxd: prctl(PR_SET_DUMPABLE, 0) failed; refusing to serve a token agent code "
                         "could read from this process's memory")


def listen() -> socket.socket:
    """The TCP port, or with HARNESS_SANDBOX_HANDOFF the Unix socket the harness hands over there (its
    socket transport, for a sandbox with no network): this process connects to the handoff socket in
    the read-only directory the host mounted in and receives, as a file descriptor, a listening socket
    the harness bound in a directory of its own, out of agent code's reach."""
    path = os.environ.pop("HARNESS_SANDBOX_HANDOFF", "")
    if not path:
        return socket.create_server(("0.0.0.0", PORT), backlog=LISTEN_BACKLOG)
    fds = array.array("i")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as handoff:
        handoff.connect(path)
        _, ancillary, _, _ = handoff.recvmsg(1, socket.CMSG_SPACE(fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    if len(fds) != 1:
        raise SystemExit(f"sandboxd: the harness handed over no socket at {path}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fds[0])
    sock.listen(LISTEN_BACKLOG)
    return sock


async def main() -> None:
    if not TOKEN:
        raise SystemExit("sandboxd: HARNESS_SANDBOX_TOKEN is not set; refusing to serve without a token")
    _seal_memory()
    sock = listen()
    if os.getpid() == 1:
        asyncio.ensure_future(init_loop())
    await serve(sock)


if __name__ == "__main__":
    asyncio.run(main())
