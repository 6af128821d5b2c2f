"""The agent's HTTP requests, from a loopback port inside the sandbox to the host's proxy, over `Sandbox.exec`.

The sandbox contract has no channel from the sandbox to the host, and with `--network none` the
sandbox reaches nothing outside itself (harness/sandbox/docker/networks.py): no port is opened for
this, no firewall rule changed, so the guard against host services holds as it is, and any
provider's sandbox works. Instead:

- `run` (one long exec, the agent's lifetime) starts RELAY inside the sandbox: an HTTP server on
  127.0.0.1 (a free port) and the agent's command under it, with OPENAI_BASE_URL and
  ANTHROPIC_BASE_URL naming that port. Each request the agent makes is written, whole, to the spool
  folder as `req-N.json`; the server answers it once `res-N.json` appears. The agent's exit code ends
  the exec (its stdout and stderr are the exec's); `done` marks the end for the other execs.
- `exchange` (one short exec per request) delivers the previous answer, then waits up to
  EXCHANGE_WAIT_S for the next request (or the end) and returns it: one exec per model call.
- `stop` delivers a last answer and kills the agent's process group (a limit or a failed model call
  ends the instance; the agent is not left to run on).

Everything in the spool folder belongs to the agent's own instance: agent code may read or write it,
which harms nothing but that instance. Requests are carried as they came (headers and body), so the
proxy, not the relay, checks the instance's token.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from harness.errors import InfraError
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

def put(name, data):
    tmp = os.path.join(spool, "." + name)
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.rename(tmp, os.path.join(spool, name))

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
        put("res-%s.json" % int(sys.argv[3]), sys.stdin.buffer.read())

if mode == "run":
    import base64, http.server, json, signal, subprocess, threading
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

        def relay(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BYTES:
                self.close_connection = True
                return self.send(413, {"Content-Type": "application/json"}, b'{"error": {"message": "too large"}}')
            body = self.rfile.read(length)
            with lock:
                count[0] += 1
                n = count[0]
            put("req-%d.json" % n, json.dumps({"id": n, "method": self.command, "path": self.path,
                                               "headers": dict(self.headers.items()),
                                               "body": base64.b64encode(body).decode()}).encode())
            res = os.path.join(spool, "res-%d.json" % n)
            wait_for(lambda: os.path.exists(res) or os.path.exists(STOP), float("inf"))
            if not os.path.exists(res):
                return self.send(503, {"Content-Type": "application/json"}, b'{"error": {"message": "stopped"}}')
            with open(res) as fh:
                answer = json.load(fh)
            os.unlink(res)
            self.send(answer["status"], answer["headers"], base64.b64decode(answer["body"]))

        do_GET = do_POST = do_PUT = do_DELETE = relay

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]
    env = dict(os.environ, OPENAI_BASE_URL=base + "/v1", ANTHROPIC_BASE_URL=base)
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
elif mode == "stop":
    answer_now()
    os.makedirs(spool, exist_ok=True)
    put("stop", b"")
"""


def _script() -> str:
    return RELAY.replace("MAX_BYTES", str(MAX_REQUEST_BYTES))


Forward = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class Relay:
    """One run of an agent command under the in-sandbox relay; its spool folder is `spool`."""

    def __init__(self, sandbox: Sandbox, spool: str):
        self.sandbox, self.spool = sandbox, spool

    def run(self, argv: list[str], task: str, env: Mapping[str, str], timeout: float | None) -> ExecResult:
        """The agent's whole run (blocking): its exit code, stdout and stderr."""
        return self.sandbox.exec([*PYTHON, "-c", _script(), "run", self.spool, "", *argv], stdin=task,
                                 env=env, timeout=timeout)

    def exchange(self, answer: tuple[int, dict] | None) -> dict[str, Any]:
        """Deliver `answer` (request id, response), then the next request, {"done": true} or {"idle": true}."""
        argv, stdin = self._with(answer, "exchange", str(EXCHANGE_WAIT_S))
        done = self.sandbox.exec(argv, stdin=stdin, timeout=EXCHANGE_WAIT_S + EXCHANGE_GRACE_S)
        if not done.ok:
            raise InfraError(f"the sandbox's model relay failed (exit {done.exit_code}): {done.stderr.strip()[-500:]}")
        return json.loads(done.stdout)

    def stop(self, answer: tuple[int, dict] | None) -> None:
        """Deliver a last answer, then kill the agent."""
        argv, stdin = self._with(answer, "stop")
        self.sandbox.exec(argv, stdin=stdin, timeout=EXCHANGE_GRACE_S)

    def _with(self, answer: tuple[int, dict] | None, mode: str, *rest: str) -> tuple[list[str], str | None]:
        """The argv of a relay command delivering `answer`, and its stdin (the response)."""
        argv = [*PYTHON, "-c", _script(), mode, self.spool, str(answer[0]) if answer else "", *rest]
        return argv, json.dumps(answer[1]) if answer else None


async def relayed(relay: Relay, argv: list[str], task: str, env: Mapping[str, str], timeout: float | None,
                  forward: Forward, stopping: Callable[[], bool],
                  guard: Callable[[Awaitable[Any]], Awaitable[Any]]) -> ExecResult:
    """Run the agent, forwarding each of its requests (`forward(request) -> response`) until it ends,
    or until `stopping()` says the instance must end (the agent then gets its last answer and is killed).
    `guard` is Environments.guard: a dead sandbox stops the instance."""
    main = asyncio.ensure_future(guard(asyncio.to_thread(relay.run, argv, task, env, timeout)))
    answer: tuple[int, dict] | None = None
    try:
        while True:
            request = await guard(asyncio.to_thread(relay.exchange, answer))
            answer = None
            if request.get("done") or (request.get("idle") and main.done()):
                break
            if "id" in request:
                answer = (request["id"], await forward(request))
                if stopping():
                    await guard(asyncio.to_thread(relay.stop, answer))
                    break
        return await main
    finally:
        if not main.done():
            main.cancel()
