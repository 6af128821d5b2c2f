"""The agent's HTTP requests, from a loopback port inside the sandbox to the host's proxy, over `Sandbox.exec`.

The sandbox contract has no channel from the sandbox to the host, and with `--network none` the
sandbox reaches nothing outside itself (harness/sandbox/docker/networks.py): no port is opened for
this, no firewall rule changed, so the guard against host services holds as it is, and any
provider's sandbox works. Instead:

- `run` (one long exec, the agent's lifetime) starts RELAY inside the sandbox: an HTTP server on
  127.0.0.1 (a free port) and the agent's command under it, with OPENAI_BASE_URL,
  ANTHROPIC_BASE_URL and HARNESS_MCP_URL (the tools' MCP server, tools.py) naming that port. Each
  request the agent makes is written to the spool folder: its body, whole, as `body-N`, then its
  method, path and headers as `req-N.json`; the server answers it once `res-N` appears (a line of
  JSON, status and headers, then the body's bytes). A body over MAX_REQUEST_BYTES is read and dropped,
  and answered 413 saying the limit. A request the agent hangs up on mid-body is dropped there (no
  `req-N.json`); one whose body is gone when the host reads it (the agent hung up once it was sent) is
  dropped by the host (`exchange`): neither ends the instance. The agent's exit code ends the exec (its
  stdout and stderr are the exec's); `done` marks the end for the other execs.
- `exchange` (one short exec per request) delivers the previous answer (its stdin), then waits up to
  EXCHANGE_WAIT_S for the next request (or the end) and prints its `req-N.json`: one exec per model
  call. The body is read with `Sandbox.read_file`, never through the exec's output (capped at
  DEFAULT_MAX_OUTPUT, 1 MiB), so requests and replies up to MAX_REQUEST_BYTES pass whole.
- `stop` delivers a last answer and kills the agent's process group (a limit or a failed model call
  ends the instance; the agent is not left to run on).

Everything in the spool folder belongs to the agent's own instance: agent code may read or write it,
which harms nothing but that instance. Requests are carried as they came (headers and body), so the
proxy, not the relay, checks the instance's token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from harness.errors import InfraError, SandboxFileNotFound
from harness.sandbox.contract import ExecResult, Sandbox

ROOT = "/tmp/harness-agent"
PYTHON = ("python3", "-S")  # no site: each exchange is a fresh interpreter, its start-up is the relay's cost
EXCHANGE_WAIT_S = 5.0  # one exchange's wait for the next request; then it asks again
EXCHANGE_GRACE_S = 30.0  # beyond the wait: the exec's own timeout
MAX_REQUEST_BYTES = 64 * 1024 * 1024  # one request body the relay accepts (413 beyond)

RELAY = r"""
import os, sys, time
mode, spool = sys.argv[1], sys.argv[2]
STOP, DONE = os.path.join(spool, "stop"), os.path.join(spool, "done")

def put(name, data, length=None):
    # `name` in the spool, atomically: `data` bytes, or `length` bytes read from the file `data`; False (and
    # nothing put) when `data` ends, or breaks, before `length` bytes
    tmp = os.path.join(spool, "." + name)
    with open(tmp, "wb") as fh:
        if length is None:
            fh.write(data)
        while length:
            try:
                chunk = data.read(min(length, 1 << 20))
            except OSError:
                chunk = b""
            if not chunk:
                break
            fh.write(chunk)
            length -= len(chunk)
    if length and length != float("inf"):
        os.unlink(tmp)
        return False
    os.rename(tmp, os.path.join(spool, name))
    return True

def drop(stream, length):
    while length > 0:
        chunk = stream.read(min(length, 1 << 20))
        if not chunk:
            return
        length -= len(chunk)

def wait_for(test, seconds):
    end, pause = time.monotonic() + seconds, 0.002
    while True:
        found = test()
        if found or time.monotonic() >= end:
            return found
        time.sleep(pause)
        pause = min(pause * 2, 0.05)

def answer_now():
    if len(sys.argv) > 3 and sys.argv[3]:
        put("res-%d" % int(sys.argv[3]), sys.stdin.buffer, float("inf"))

if mode == "run":
    import http.server, json, select, signal, socket, subprocess, threading
    os.makedirs(spool, exist_ok=True)
    with open(os.path.join(spool, "task.txt"), "wb") as fh:
        fh.write(sys.stdin.buffer.read())
    count, lock = [0], threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send(self, status, headers, data):
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def hung_up(self):
            if not select.select([self.connection], [], [], 0)[0]:
                return False
            try:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def relay(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BYTES:
                drop(self.rfile, length)  # read, so that the agent gets the answer, not a broken pipe
                self.close_connection = True
                message = ("the request has %d bytes, more than the %d (%d MiB) the harness's model relay carries"
                           % (length, MAX_BYTES, MAX_BYTES >> 20))
                return self.send(413, {"Content-Type": "application/json"}, json.dumps(
                    {"error": {"message": message, "type": "request_too_large"}}).encode())
            with lock:
                count[0] += 1
                n = count[0]
            if not put("body-%d" % n, self.rfile, length):  # the agent hung up mid-body: dropped here
                self.close_connection = True
                return
            put("req-%d.json" % n, json.dumps({"id": n, "method": self.command, "path": self.path,
                                               "headers": dict(self.headers.items())}).encode())
            res = os.path.join(spool, "res-%d" % n)
            wait_for(lambda: os.path.exists(res) or os.path.exists(STOP) or self.hung_up(), float("inf"))
            try:
                os.unlink(os.path.join(spool, "body-%d" % n))
            except OSError:
                pass
            if not os.path.exists(res) and not os.path.exists(STOP):  # the agent gave up on it
                self.close_connection = True
                return put("gone-%d" % n, b"")
            if not os.path.exists(res):
                return self.send(503, {"Content-Type": "application/json"}, b'{"error": {"message": "stopped"}}')
            with open(res, "rb") as fh:
                answer = json.loads(fh.readline())
                data = fh.read()
            os.unlink(res)
            self.send(answer["status"], answer["headers"], data)

        do_GET = do_POST = do_PUT = do_DELETE = relay

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]
    env = dict(os.environ, OPENAI_BASE_URL=base + "/v1", ANTHROPIC_BASE_URL=base, HARNESS_MCP_URL=base + "/mcp")
    with open(os.path.join(spool, "task.txt"), "rb") as task:
        child = subprocess.Popen(sys.argv[4:], stdin=task, env=env, start_new_session=True)

    def stopper():
        wait_for(lambda: os.path.exists(STOP), float("inf"))
        os.killpg(child.pid, signal.SIGKILL)

    threading.Thread(target=stopper, daemon=True).start()
    code = child.wait()
    code = 128 - code if code < 0 else code
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        pass
    put("done", str(code).encode())
    sys.stdout.flush()
    os._exit(code)
elif mode == "exchange":
    answer_now()

    def take():
        try:
            names = sorted((n for n in os.listdir(spool) if n.startswith("req-")), key=lambda n: int(n[4:-5]))
        except FileNotFoundError:
            return None
        for name in names:
            taken = os.path.join(spool, "taken-" + name)
            try:
                os.rename(os.path.join(spool, name), taken)
            except FileNotFoundError:
                continue
            with open(taken) as fh:
                text = fh.read()
            os.unlink(taken)
            return text
        return '{"done": true}' if os.path.exists(DONE) else None

    print(wait_for(take, float(sys.argv[4])) or '{"idle": true}')
elif mode == "watch":
    gone = os.path.join(spool, "gone-%d" % int(sys.argv[3]))
    print("gone" if wait_for(lambda: os.path.exists(gone) or os.path.exists(DONE), float(sys.argv[4])) else "")
elif mode == "stop":
    answer_now()
    os.makedirs(spool, exist_ok=True)
    put("stop", b"")
"""


def _script() -> str:
    return RELAY.replace("MAX_BYTES", str(MAX_REQUEST_BYTES))


Forward = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]  # a request -> its status, headers, body (bytes)
Answer = tuple[int, dict[str, Any]]  # a request's id, its response


class Relay:
    """One run of an agent command under the in-sandbox relay; its spool folder is `spool`."""

    def __init__(self, sandbox: Sandbox, spool: str):
        self.sandbox, self.spool = sandbox, spool

    def run(self, argv: list[str], task: str, env: Mapping[str, str], timeout: float | None) -> ExecResult:
        """The agent's whole run (blocking): its exit code, stdout and stderr."""
        return self.sandbox.exec([*PYTHON, "-c", _script(), "run", self.spool, "", *argv], stdin=task,
                                 env=env, timeout=timeout)

    def exchange(self, answer: Answer | None) -> dict[str, Any]:
        """Deliver `answer` (request id, response), then the next request (its `body` read as bytes),
        {"done": true}, {"idle": true}, or {"dropped": id}: a request whose body is gone (the agent hung up on it
        and the relay removed it, or the agent did), which nobody is left to answer."""
        argv, stdin = self._with(answer, "exchange", str(EXCHANGE_WAIT_S))
        done = self.sandbox.exec(argv, stdin=stdin, timeout=EXCHANGE_WAIT_S + EXCHANGE_GRACE_S)
        if not done.ok:
            raise InfraError(f"the sandbox's model relay failed (exit {done.exit_code}): {done.stderr.strip()[-500:]}")
        request: dict[str, Any] = json.loads(done.stdout)
        if "id" in request:  # the body's path is the relay's rule, not what the spool says
            try:
                request["body"] = self.sandbox.read_file(f"{self.spool}/body-{int(request['id'])}",
                                                         max_bytes=MAX_REQUEST_BYTES)
            except SandboxFileNotFound:
                return {"dropped": int(request["id"])}
        return request

    def gave_up(self, request: int) -> bool:
        """Whether the agent hung up on `request` (or ended) within EXCHANGE_WAIT_S."""
        argv = [*PYTHON, "-c", _script(), "watch", self.spool, str(request), str(EXCHANGE_WAIT_S)]
        done = self.sandbox.exec(argv, timeout=EXCHANGE_WAIT_S + EXCHANGE_GRACE_S)
        return done.ok and done.stdout.strip() == "gone"

    def stop(self, answer: Answer | None) -> None:
        """Deliver a last answer, then kill the agent."""
        argv, stdin = self._with(answer, "stop")
        self.sandbox.exec(argv, stdin=stdin, timeout=EXCHANGE_GRACE_S)

    def _with(self, answer: Answer | None, mode: str, *rest: str) -> tuple[list[str], bytes | None]:
        """The argv of a relay command delivering `answer`, and its stdin: the response's status and
        headers as a line of JSON, then its body."""
        argv = [*PYTHON, "-c", _script(), mode, self.spool, str(answer[0]) if answer else "", *rest]
        if answer is None:
            return argv, None
        head = {"status": answer[1]["status"], "headers": answer[1]["headers"]}
        return argv, json.dumps(head).encode() + b"\n" + answer[1]["body"]


async def relayed(relay: Relay, argv: list[str], task: str, env: Mapping[str, str], timeout: float | None,
                  forward: Forward, stopping: Callable[[], bool],
                  guard: Callable[[Awaitable[Any]], Awaitable[Any]], abandon: Callable[[], None] | None = None,
                  ) -> ExecResult:
    """Run the agent, forwarding each of its requests (`forward(request) -> response`) until it ends,
    or until `stopping()` says the instance must end (the agent then gets its last answer and is killed).
    `guard` is Environments.guard: a dead sandbox stops the instance. Whatever else ends this early (a
    failed exchange, a failed forward) kills the agent too: it would otherwise wait for its answer, and
    hold its sandbox, until the instance's timeout. An agent that ends, or hangs up on a request, while
    the request is forwarded (it gave up on it: `Relay.gave_up` asks every EXCHANGE_WAIT_S) ends the
    forward too: `abandon()` cancels it (the proxy's model call, whose connection closes, so a server
    that cancels on disconnect frees its slot), nobody being left to read its answer."""
    main = asyncio.ensure_future(guard(asyncio.to_thread(relay.run, argv, task, env, timeout)))
    answer: Answer | None = None
    try:
        while True:
            request = await guard(asyncio.to_thread(relay.exchange, answer))
            answer = None
            if request.get("done") or (request.get("idle") and main.done()):
                break
            if "dropped" in request:  # abandoned by the agent: nobody to answer, the instance goes on
                continue
            if "id" in request:
                pending = asyncio.ensure_future(forward(request))
                await asyncio.wait({pending, main}, timeout=EXCHANGE_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
                while not (pending.done() or main.done()) and abandon is not None:  # a slow call: watched
                    watch = asyncio.ensure_future(guard(asyncio.to_thread(relay.gave_up, request["id"])))
                    await asyncio.wait({pending, main, watch}, return_when=asyncio.FIRST_COMPLETED)
                    if watch.done() and watch.result():
                        break
                if not pending.done() and abandon is not None:  # the agent ended or hung up, its request in flight
                    abandon()
                    with contextlib.suppress(Exception):
                        await pending
                    if main.done():
                        break
                    continue
                answer = (request["id"], await pending)
                if stopping():
                    await guard(asyncio.to_thread(relay.stop, answer))
                    break
        return await main
    finally:
        if not main.done():
            with contextlib.suppress(Exception):
                await asyncio.to_thread(relay.stop, None)
            main.cancel()
