"""sandboxd: the in-container service of a harness sandbox (stdlib only).

One small asyncio HTTP/1.1 server on one port. The harness talks to it instead of
`docker exec` because a request on a kept-alive connection costs ~1-9 ms where an
exec costs ~50 ms. Endpoints (JSON unless said otherwise):

  GET  /health                 -> {"ok": true}
  POST /exec    {argv, stdin? | stdin_b64?, timeout (null: none), cwd?, env?, max_output}
                               -> {exit_code, signal, stdout, stderr, timed_out, *_truncated, duration}
                                  exit codes as a shell reports them: 126 cannot execute, 127 not
                                  found or no such cwd, 128+N killed by signal N (137 on timeout)
  POST /upload?dest=DIR        body: an uncompressed tar of regular files and dirs (<= MAX_BODY)
  GET  /file?path=P&max_bytes=N -> the file's bytes, streamed; refused when larger than N
  POST /browser/start          -> {"ws_path": "/devtools/browser/..."}: starts Chromium on first use
                                  (and again after a crash), DevTools on 127.0.0.1:9222 only
  /devtools/..., /json/...     -> forwarded byte for byte to Chromium's DevTools (WebSocket included),
                                  so the harness reaches the browser through this one published port

Every request must carry the header X-Harness-Token equal to $HARNESS_SANDBOX_TOKEN; without
that variable the service refuses to start. A refusal is {"error": text, "code": CODE} with
CODE one of not_found, permission, is_a_directory, too_large, unsupported, bad_request.
A command runs in its own session; on timeout the whole process tree (session,
process group, every descendant found in /proc, and every process whose environment
carries the command's HARNESS_COMMAND_TAG, e.g. a daemon that double-forked out of the
tree) is SIGKILLed. A command ends when its main process does: background children that
still hold its stdout/stderr get PIPE_GRACE_S, then their further output is read and dropped.

sandboxd is the container's PID 1, and so its init: the kernel ignores signals
sent to PID 1 from inside its namespace unless it handles them, so agent code
(`kill -9 -1`, `pkill python3`) cannot take the service, and the sandbox, down.
As init it also reaps the orphans that end up as its children.
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import hmac
import io
import json
import os
import pwd
import secrets
import signal
import stat
import tarfile
import time
import urllib.parse


def _take_token() -> str:
    """The token, removed from the environment commands inherit and wiped from this process's
    memory: popping it alone leaves it readable by agent code in /proc/1/environ."""
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
HEADER_TIMEOUT_S = 3600.0  # connections stay alive between an agent's commands; silent ones go
# Commands running at once. Each costs a child-watcher thread and counts against the
# sandbox's pids limit (with Chromium's ~200 threads); beyond this they queue.
MAX_PARALLEL_COMMANDS = 32
# After the command's main process exits, background children may still hold its
# pipes open; wait this long for EOF, then answer with what was read.
PIPE_GRACE_S = 0.2
# Set to a fresh value in each command's environment: on timeout, processes that left the
# command's tree (a double fork, `setsid -f`) are still found by it and killed.
COMMAND_TAG_VAR = "HARNESS_COMMAND_TAG"


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


def kill_tree(root: int, tag: str | None = None) -> None:
    """SIGKILL root, its session, its process group and all its descendants, and with a tag,
    every process whose environment carries it (daemons that left the tree)."""
    for _ in range(3):  # repeat: a process may fork while we look
        table = _proc_table()
        doomed = {pid for pid, (_, pgid, sid) in table.items() if sid == root or pgid == root}
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
        alive = [pid for pid in doomed if pid in table]
        if not alive:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


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
    except (OSError, RuntimeError) as exc:  # the sandbox's process limit is reached, or similar
        return _not_started(126, f"{argv[0]}: cannot start ({exc})")
    out, err = {}, {}
    readers = [asyncio.ensure_future(_drain(proc.stdout, cap, out)),
               asyncio.ensure_future(_drain(proc.stderr, cap, err))]
    feeder = asyncio.ensure_future(_feed(proc.stdin, stdin_data)) if stdin_data is not None else None
    timed_out = False
    try:
        # The deadline covers writing stdin too: a command that never reads it must not hang us.
        # `exited`, not proc.wait(): that also waits for background children to close the pipes.
        await asyncio.wait_for(asyncio.shield(proc.exited), timeout)  # None: no limit
    except asyncio.TimeoutError:
        timed_out = True
        kill_tree(proc.pid, tag)
        await proc.exited
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


def _not_started(code: int, message: str) -> dict:
    return {"exit_code": code, "signal": None, "stdout": "", "stderr": message + "\n", "timed_out": False,
            "stdout_truncated": False, "stderr_truncated": False, "duration": 0.0}


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


async def spawn(*argv: str, **kwargs) -> asyncio.subprocess.Process:
    """Start argv in a session of its own; the Process gets an `exited` future."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(lambda: _Protocol(2**16, loop), *argv,
                                                     start_new_session=True, **kwargs)
    proc = asyncio.subprocess.Process(transport, protocol, loop)
    proc.exited = protocol.exited
    _spawned.add(proc.pid)
    proc.exited.add_done_callback(lambda _: _spawned.discard(proc.pid))
    return proc


# --------------------------------------------------------------------- files
def _inside(base: str, path: str) -> bool:
    return os.path.commonpath([base, path]) == base


def extract_upload(body: bytes, dest: str) -> dict:
    try:
        return _extract(body, dest)
    except tarfile.TarError as exc:
        raise HttpError(400, f"not a tar archive: {exc}") from None
    except OSError as exc:
        raise os_error(exc, exc.filename or dest) from None


def _extract(body: bytes, dest: str) -> dict:
    dest = os.path.realpath(dest)
    if not _inside("/workspace", dest) and not _inside("/tmp", dest):
        raise HttpError(400, f"upload destination {dest} is outside /workspace and /tmp")
    written = []
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as tar:
        members = tar.getmembers()
        for m in members:  # validate everything before writing anything
            name = os.path.normpath(m.name)
            if os.path.isabs(m.name) or name.startswith("..") or not (m.isfile() or m.isdir()):
                raise HttpError(400, f"refused archive member {m.name!r}")
        for m in members:
            target = os.path.realpath(os.path.join(dest, m.name))
            if not _inside(dest, target):
                raise HttpError(400, f"refused archive member {m.name!r} (escapes {dest})")
            if m.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            src = tar.extractfile(m)
            # O_NONBLOCK: an existing FIFO in the way must not block the service (it is refused).
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise HttpError(400, f"refused archive member {m.name!r}: {target} is not a regular file")
            with os.fdopen(fd, "wb") as fh:
                while chunk := src.read(1 << 20):
                    fh.write(chunk)
            written.append(m.name)
    return {"written": written}


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
    except (OSError, ValueError, IndexError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        return None
    finally:
        writer.close()


async def start_browser(timeout: float = 30.0, force: bool = False) -> dict:
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
            CHROMIUM, *CHROMIUM_FLAGS, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
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
    lines = [l for l in head.split(b"\r\n") if not l.lower().startswith((b"host:", b"connection:"))]
    upgrade = any(l.lower().startswith(b"upgrade:") for l in lines)
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
async def dispatch(method: str, target: str, body: bytes) -> tuple[int, bytes, str]:
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
        result = extract_upload(body, query.get("dest", "/workspace"))
        return 200, json.dumps(result).encode(), "application/json"
    if method == "GET" and url.path == "/file":
        max_bytes = _field(query, "max_bytes", int, 64 * 1024 * 1024)
        return 200, FileBody(query.get("path", ""), max_bytes), "application/octet-stream"
    if method == "POST" and url.path == "/browser/start":
        force = query.get("force") == "1"
        return 200, json.dumps(await start_browser(force=force)).encode(), "application/json"
    raise HttpError(404, f"no route {method} {url.path}")


_UNAUTHORIZED_BODY = b'{"error": "bad or missing X-Harness-Token"}'
_UNAUTHORIZED = (b"HTTP/1.1 401 X\r\nContent-Type: application/json\r\nConnection: close\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(_UNAUTHORIZED_BODY)) + _UNAUTHORIZED_BODY


def authorized(headers: dict) -> bool:
    return bool(TOKEN) and hmac.compare_digest(headers.get("x-harness-token", "").encode(), TOKEN.encode())


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                # An idle or silent connection is dropped; a peer cannot hold sockets open forever.
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEADER_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
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
            if target.startswith(("/devtools/", "/json")) and authorized(headers):
                await forward(head, reader, writer)
                return
            if not authorized(headers):  # before reading any body: strangers get nothing buffered
                writer.write(_UNAUTHORIZED)
                await writer.drain()
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
            body = await reader.readexactly(length) if length else b""
            try:
                status, payload, ctype = await dispatch(method, target, body)
            except HttpError as exc:
                status, payload, ctype = exc.status, _error_body(exc), "application/json"
            except Exception as exc:  # report, keep serving
                status = 500
                payload = json.dumps({"error": f"{type(exc).__name__}: {exc}", "code": "internal"}).encode()
                ctype = "application/json"
            await respond(writer, status, payload, ctype)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


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


async def main() -> None:
    if not TOKEN:
        raise SystemExit("sandboxd: HARNESS_SANDBOX_TOKEN is not set; refusing to serve without a token")
    server = await asyncio.start_server(handle, "0.0.0.0", PORT)
    if os.getpid() == 1:
        asyncio.ensure_future(init_loop())
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
