"""A stdio MCP server inside the sandbox, reached from the host through `Sandbox.exec` alone.

The sandbox contract has no streaming channel, and needs none: `start_bridge` runs a small bridge
(BRIDGE, the toolbox's python3) that forks away from its command, starts the server with pipes and
stays as its parent, in a folder of its own under /tmp/harness-mcp/: it copies what arrives on the
FIFO `in` to the server's stdin, appends each line of the server's stdout to `out` (one write per
line), keeps its stderr in `err`, and writes the exit code to `status` when the server ends.
The host writes a message with one exec (`cat > in`) and reads new lines with another
(`tail -c +OFFSET out`, base64 so bytes come back exact), polling only while a request awaits its
answer: an idle server costs nothing. Any provider's sandbox works this way (docker, swarm, your
own). No bench measures a tool call's cost through the bridge yet.

A message is bounded where it is made: a line of the server's stdout longer than MAX_MESSAGE_BYTES
(a 16 MiB image part, base64, fits) is never held whole, in the sandbox or here. The bridge keeps its
first bytes and its last 4 KiB, drops the rest, and writes in its place an answer to the same request
id (looked for where the SDKs put it: at the start, or at the end) whose one text part is the start of
the answer's first text part, at most PREVIEW_CHARS of it, then a line saying the answer was cut and
its size; it is marked an error (the client then checks no output schema against it) and CUT_KEY in
its `_meta`, which the tool's caller reads as the result it is (mcp_tools.py). On the host a line is
never let grow past MAX_MESSAGE_BYTES either (agent code may write `out` itself): a longer one is
dropped as it arrives, and the session is told.

The bridge runs as the agent, like the server: agent code may reach its files, which harms only its
own instance. A server that decides a verdict (Gaia2's ARE) is therefore bridged in the instance's judge's
sandbox instead, which no agent code reaches (benchmarks/gaia2/environment.py). The server lives until its
sandbox is removed.

`sandbox_stdio` is the transport: the (read, write) pair of anyio streams an `mcp.ClientSession`
takes, like the SDK's own stdio_client, over a `BridgePipe`.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager

import anyio
import mcp.types as types
from mcp.shared.message import SessionMessage

from harness.errors import InfraError
from harness.sandbox.contract import Sandbox

ROOT = "/tmp/harness-mcp"
MAX_MESSAGE_BYTES = 24 * 1024 * 1024  # of one message from a server (a 16 MiB image part, base64, fits)
CUT_KEY = "harness/cut"  # in a cut answer's _meta: the bytes the server's answer had
PREVIEW_CHARS = 19_000  # of a cut answer's first text part kept (under mcp_tools.MAX_RESULT_CHARS with the note)
READ_CHUNK = 4 * 1024 * 1024  # bytes of new output one poll takes at most
POLL_FIRST, POLL_MOST = 0.005, 0.2  # seconds between polls while an answer is awaited (doubling)
COMMAND_TIMEOUT = 30.0  # one send or poll; a server that takes no input for this long is stuck

BRIDGE = r"""
import json, os, re, subprocess, sys, threading
root, limit, preview, argv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
CUT = "CUT_KEY"
os.makedirs(root)
fifo, out, err, status = (os.path.join(root, n) for n in ("in", "out", "err", "status"))
os.mkfifo(fifo, 0o600)
open(out, "wb").close()
ready_r, ready_w = os.pipe()
if os.fork():
    os.close(ready_w)
    message = os.read(ready_r, 4096).decode(errors="replace")
    if message:
        print(message, file=sys.stderr)
    sys.exit(127 if message else 0)
os.close(ready_r)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
try:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(err, "wb"))
except OSError as exc:
    os.write(ready_w, f"cannot start {argv[0]!r}: {exc.strerror or exc}".encode())
    os._exit(127)
os.close(ready_w)

def feed():
    fd = os.open(fifo, os.O_RDWR)  # read and write: never an end of file between the host's writes
    while True:
        data = os.read(fd, 65536)
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
        except OSError:
            return

ID = rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")'

def first_text(head):
    # The start of the first text part in `head` (a message cut short), at most `preview` characters.
    found = re.search(rb'"text"\s*:\s*"', head)
    if not found:
        return ""
    start = head[found.end():found.end() + 6 * preview + 6].decode("utf-8", "ignore")
    decoder = json.JSONDecoder()
    for end, close in [(len(start), "")] + [(n, '"') for n in range(len(start), max(len(start) - 7, -1), -1)]:
        try:  # the part whole if it ends within; else cut before a torn escape
            return decoder.raw_decode('"' + start[:end] + close)[0][:preview]
        except ValueError:
            continue
    return ""

def cut(head, stream):
    # A line longer than `limit`: read to its end holding only its last 4 KiB; the answer that replaces it.
    total, tail = len(head), b""
    while True:
        more = stream.readline(1 << 20)
        total += len(more)
        tail = (tail + more)[-4096:]
        if not more or more.endswith(b"\n"):
            break
    found = re.match(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?' + ID, head) or re.search(ID + rb'\s*\}\s*$', tail)
    if not found or re.match(rb'\s*\{[^{]*"method"', head):
        with open(err, "ab") as fh:
            fh.write(b"[harness] a message of %d bytes (over %d) that answers no request: dropped\n" % (total, limit))
        return b""
    note = "[... cut: the server's answer had %d bytes, more than the %d an MCP message may have]" % (total, limit)
    text = first_text(head)
    answer = {"jsonrpc": "2.0", "id": json.loads(found.group(1)),
              "result": {"content": [{"type": "text", "text": text + ("\n" if text else "") + note}],
                         "isError": True, "_meta": {CUT: total}}}  # an error: the client checks no output schema
    return json.dumps(answer).encode() + b"\n"

threading.Thread(target=feed, daemon=True).start()
sink = os.open(out, os.O_WRONLY | os.O_APPEND)
while True:
    line = proc.stdout.readline(limit + 1)
    if not line:
        break
    if len(line) > limit and not line.endswith(b"\n"):
        line = cut(line, proc.stdout)
    if line:
        os.write(sink, line)
code = proc.wait()
with open(status + ".tmp", "w") as fh:
    fh.write(str(code))
os.replace(status + ".tmp", status)
"""

SEND = '[ -e "$1/status" ] && { echo "the server has exited" >&2; exit 3; }; exec cat > "$1/in"'
POLL = 'tail -c +"$2" "$1/out" | head -c "$3" | base64 -w0; echo; cat "$1/status" 2>/dev/null; true'


class McpServerFailed(InfraError):
    """A server of the run's configuration could not be started or initialised in an instance
    (the preflight checked that it can be, so this is the instance's infrastructure: retried)."""


class McpServerGone(InfraError):
    """A server's connection closed while the instance ran: its process ended (a command server that died, in
    a sandbox that may be sound; Gaia2's ARE). The instance's infrastructure, like a server that did not start."""


class BridgePipe:
    """The host's end of one bridged server: `send` bytes, `poll` for new output."""

    def __init__(self, sandbox: Sandbox, root: str):
        self.sandbox, self.root = sandbox, root
        self.offset = 0
        self.exit_code: int | None = None

    def send(self, data: bytes) -> bool:
        """Write to the server's stdin; False when the server is gone."""
        result = self.sandbox.exec(["bash", "-c", SEND, "_", self.root], stdin=data, timeout=COMMAND_TIMEOUT)
        return result.ok

    def poll(self) -> bytes:
        """The server's output since the last poll (at most READ_CHUNK bytes); sets `exit_code` once it ended."""
        result = self.sandbox.exec(["bash", "-c", POLL, "_", self.root, str(self.offset + 1), str(READ_CHUNK)],
                                   timeout=COMMAND_TIMEOUT, max_output=2 * READ_CHUNK)
        encoded, _, status = result.stdout.partition("\n")
        data = base64.b64decode(encoded.strip() or b"")
        self.offset += len(data)
        if not data and status.strip():
            self.exit_code = int(status.strip())
        return data

    def stderr_tail(self, size: int = 2000) -> str:
        result = self.sandbox.exec(["tail", "-c", str(size), f"{self.root}/err"], timeout=COMMAND_TIMEOUT)
        return result.stdout.strip()


def start_bridge(sandbox: Sandbox, name: str, argv: Sequence[str], env: Mapping[str, str]) -> BridgePipe:
    """Start `argv` as a bridged stdio server in the sandbox; McpServerFailed when it cannot start."""
    root = f"{ROOT}/{name}-{secrets.token_hex(4)}"
    script = BRIDGE.replace("CUT_KEY", CUT_KEY)
    result = sandbox.exec(["python3", "-c", script, root, str(MAX_MESSAGE_BYTES), str(PREVIEW_CHARS), *argv],
                          env=dict(env), timeout=COMMAND_TIMEOUT)
    if not result.ok:
        raise McpServerFailed(f"MCP server {name!r}: {result.stderr.strip()[-1000:] or f'exit {result.exit_code}'}")
    return BridgePipe(sandbox, root)


FIND = ('for d in "$1"/"$2"-*/; do [ -p "$d/in" ] && [ ! -e "$d/status" ] && '
        '{ printf "%s\\n" "${d%/}"; stat -c %s "$d/out"; exit 0; }; done; exit 1')


def attach_bridge(sandbox: Sandbox, name: str) -> BridgePipe | None:
    """The host's end of a bridged server named `name` that a process now gone started in the sandbox and that
    still runs (its output read from here on, a line the gone process may have half written ended first); None:
    no such server."""
    result = sandbox.exec(["bash", "-c", FIND, "_", ROOT, name], timeout=COMMAND_TIMEOUT)
    root, _, size = result.stdout.strip().partition("\n")
    if not result.ok or not root or not size.strip().isdigit():
        return None
    pipe = BridgePipe(sandbox, root)
    pipe.offset = int(size)
    return pipe if pipe.send(b"\n") else None


@asynccontextmanager
async def sandbox_stdio(pipe: BridgePipe, on_fatal: Callable[[BaseException], None] | None = None,
                        ) -> AsyncIterator[tuple]:
    """The MCP client's streams over a bridged server. Output is polled while a request awaits its
    answer; the read stream ends when the server has exited. A dead sandbox goes to `on_fatal`."""
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    awaited: set = set()
    wake = anyio.Event()

    async def guarded(fn: Callable, *args: object, abandon: bool = False):
        try:
            return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=abandon)
        except InfraError as exc:
            if on_fatal is not None:
                on_fatal(exc)
            raise

    async def writer() -> None:
        nonlocal wake
        async with write_reader:
            async for message in write_reader:
                if isinstance(message.message, types.JSONRPCRequest):
                    awaited.add(message.message.id)
                    wake.set()
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await guarded(pipe.send, data.encode())

    async def reader() -> None:
        nonlocal wake
        lines, delay = Lines(MAX_MESSAGE_BYTES), POLL_FIRST
        async with read_writer:
            while pipe.exit_code is None:
                if not awaited:
                    await wake.wait()
                    wake = anyio.Event()
                data = await guarded(pipe.poll, abandon=True)
                for line in lines.feed(data):
                    await read_writer.send(line if isinstance(line, Exception) else _parsed(line, awaited))
                delay = POLL_FIRST if data else min(delay * 2, POLL_MOST)
                if not data:
                    await anyio.sleep(delay)

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            group.cancel_scope.cancel()


class Lines:
    """The complete lines of a stream fed in pieces, none held past `limit` bytes: a longer line is
    dropped as it arrives (an McpMessageTooLarge in its place), up to its end."""

    def __init__(self, limit: int):
        self.limit, self.buffer, self.dropping = limit, b"", False

    def feed(self, data: bytes) -> list[bytes | Exception]:
        out: list[bytes | Exception] = []
        while data:
            head, newline, data = data.partition(b"\n")
            if not self.dropping:
                self.buffer += head
                if len(self.buffer) > self.limit:
                    self.buffer, self.dropping = b"", True
                    out.append(McpMessageTooLarge(f"a message from the server is longer than {self.limit} bytes: "
                                                  "dropped"))
            if newline:
                if not self.dropping and self.buffer.strip():
                    out.append(self.buffer)
                self.buffer, self.dropping = b"", False
        return out


class McpMessageTooLarge(ValueError):
    """A server's message longer than MAX_MESSAGE_BYTES reached the host (the bridge cuts its own)."""


def _parsed(line: bytes, awaited: set) -> SessionMessage | Exception:
    """One line of the server's stdout as a message (an answer is no longer awaited), or the error."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
        awaited.discard(message.id)
    return SessionMessage(message)
