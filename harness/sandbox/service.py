"""Host-side client of sandboxd, the in-container service (images/sandbox/sandboxd.py).

urllib3 keeps connections alive and sets TCP_NODELAY, so a command costs a few
milliseconds instead of the ~50 ms of a `docker exec`. Refusals come back typed
(`SandboxRequestError` subclasses, from the service's error `code`); a failed
connection is `ServiceUnreachable`, which the provider turns into SandboxDied
when the sandbox is gone. A command whose answer does not come in time while its
sandbox's container runs is not a dead sandbox: what slows the service down is what
runs beside it, the agent's own code, so that command timed out (the agent's outcome).
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from harness.errors import (
    InfraError,
    SandboxBadRequest,
    SandboxFileNotFound,
    SandboxIsADirectory,
    SandboxOutputLimit,
    SandboxPermissionDenied,
    SandboxRequestError,
    SandboxUnsupported,
)
from harness.sandbox.contract import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_MAX_READ,
    WORKSPACE,
    Connection,
    ExecResult,
    Sandbox,
    SandboxHandle,
    SandboxSpec,
)
from harness.sandbox.files import MAX_ARCHIVE_BYTES, archive_file, archive_size
from harness.settings import settings

if TYPE_CHECKING:  # imported by the methods that speak to a sandbox: a run that starts none
    import urllib3  # (runner/phases/idle.py) does not load the HTTP client

    from harness.sandbox.unix_http import Forward

TOKEN_HEADER = "X-Harness-Token"
# The largest request body sandboxd accepts; larger uploads are refused before sending.
MAX_BODY = MAX_ARCHIVE_BYTES
UPLOAD_BLOCK = 1 << 20  # an upload from a file is sent in blocks of this size
# Extra seconds the HTTP call waits beyond a command's own timeout: the service
# needs a moment to kill the process tree and answer after the deadline.
EXEC_GRACE_S = 15.0

_BY_CODE: dict[str, type[SandboxRequestError]] = {
    "not_found": SandboxFileNotFound,
    "permission": SandboxPermissionDenied,
    "is_a_directory": SandboxIsADirectory,
    "too_large": SandboxOutputLimit,
    "unsupported": SandboxUnsupported,
}


class ServiceUnreachable(InfraError):
    """The connection to sandboxd failed (the caller checks whether the sandbox died)."""


class ServiceTimedOut(ServiceUnreachable):
    """sandboxd took the request but did not answer within the read timeout (busy, or dead)."""

    def __init__(self, message: str, *, seconds: float | None = None):
        super().__init__(message)
        self.seconds = seconds


def poll_until(ready: Callable[[], bool], timeout: float, still_starting: Callable[[], None], giving_up: str, *,
               first: float = 0.005, most: float = 0.1, check_every: float = 0.25) -> None:
    """Ask `ready()` with a growing pause (first, x1.5, up to most) until it says yes; InfraError(giving_up)
    after `timeout` seconds. still_starting() raises if the sandbox died; it asks the engine, so it runs at most
    every `check_every` seconds (and before giving up), not after every poll: a start takes ~10 polls, and an
    engine call each would load the engine."""
    started = time.monotonic()
    deadline, next_check, delay = started + timeout, started + check_every, first
    while not ready():
        now = time.monotonic()
        if now >= next_check or now > deadline:
            still_starting()
            next_check = time.monotonic() + check_every
        if now > deadline:
            raise InfraError(giving_up)
        time.sleep(delay)
        delay = min(delay * 1.5, most)


def refusal(status: int, data: bytes) -> SandboxRequestError:
    """The typed error for a non-200 answer."""
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        body = {}
    message = body.get("error") or data[:500].decode(errors="replace") or f"HTTP {status}"
    return _BY_CODE.get(body.get("code", ""), SandboxBadRequest)(message)


class ServiceClient:
    """sandboxd at host:port, or on the Unix socket `socket` when given (host and port then only name it)."""

    def __init__(self, host: str, port: int, token: str, *, pool: int = 4, socket: str | None = None):
        self.host, self.port, self.token, self.socket = host, port, token, socket
        import urllib3

        self.headers = {TOKEN_HEADER: token}
        if socket is None:
            self._pool = urllib3.HTTPConnectionPool(host, port, maxsize=pool, block=False, retries=False,
                                                    blocksize=UPLOAD_BLOCK)
        else:
            from harness.sandbox.unix_http import UnixConnectionPool

            self._pool = UnixConnectionPool(socket, maxsize=pool, block=False, retries=False, blocksize=UPLOAD_BLOCK)
        self._forward: Forward | None = None  # a loopback port forwarded to the socket, made when first asked

    @property
    def where(self) -> str:
        return self.socket or f"{self.host}:{self.port}"

    def address(self) -> tuple[str, int]:
        """A TCP address that reaches the service (a loopback port forwarded to the socket, when it is one):
        for clients that speak only TCP, such as Playwright over CDP."""
        if self.socket is None:
            return self.host, self.port
        if self._forward is None:
            from harness.sandbox.unix_http import Forward

            self._forward = Forward(self.socket)
        return "127.0.0.1", self._forward.port

    def _request(self, method: str, path: str, *, body: bytes | BinaryIO | None = None,
                 length: int | None = None, timeout: float | None = 30.0,
                 preload: bool = True) -> urllib3.BaseHTTPResponse:
        import urllib3

        headers = self.headers if length is None else {**self.headers, "Content-Length": str(length)}
        try:
            resp = self._pool.urlopen(method, path, body=body, headers=headers,
                                      timeout=urllib3.Timeout(connect=5.0, read=timeout),
                                      preload_content=preload)
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise ServiceTimedOut(f"sandbox service {self.where}: no answer within {timeout:.0f}s",
                                  seconds=timeout) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise ServiceUnreachable(f"sandbox service {self.where}: {exc}") from exc
        if resp.status == 503:  # the service has no connection to spare: unreachable for now
            data = resp.data if preload else resp.read()
            raise ServiceUnreachable(f"sandbox service {self.where}: {refusal(resp.status, data)}")
        return resp

    def _json(self, method: str, path: str, **kwargs) -> dict:
        resp = self._request(method, path, **kwargs)
        if resp.status != 200:
            raise refusal(resp.status, resp.data)
        return json.loads(resp.data or b"{}")

    @staticmethod
    def check_upload(size: int) -> None:
        """Refuse (SandboxOutputLimit) an upload the service would refuse for its size."""
        if size > MAX_BODY:
            raise SandboxOutputLimit(f"upload of {size} bytes is over the service's limit of "
                                     f"{MAX_BODY} bytes; copy fewer or smaller files")

    def wait_ready(self, timeout: float, still_starting: Callable[[], None], check_every: float = 0.25) -> None:
        """Poll /health until it answers (`poll_until`: still_starting() raises if the sandbox died)."""
        import urllib3

        def answers() -> bool:
            try:
                return self._pool.request("GET", "/health", headers=self.headers,
                                          timeout=urllib3.Timeout(connect=1.0, read=2.0)).status == 200
            except urllib3.exceptions.HTTPError:
                return False

        poll_until(answers, timeout, still_starting, f"sandbox service {self.where} not ready after {timeout:.0f}s",
                   check_every=check_every)

    def exec(self, payload: dict, timeout: float | None) -> dict:
        stdin = payload.pop("stdin", None)
        if isinstance(stdin, (bytes, bytearray)):
            payload["stdin_b64"] = base64.b64encode(stdin).decode()
        elif stdin is not None:
            payload["stdin"] = stdin
        read = None if timeout is None else timeout + EXEC_GRACE_S
        return self._json("POST", "/exec", body=json.dumps(payload).encode(), timeout=read)

    def upload(self, archive: bytes | BinaryIO, dest: str) -> list[str]:
        """Send a tar archive, as bytes or as a binary file read from its current position to its
        end (streamed in blocks, never read whole into memory); returns the names written."""
        if isinstance(archive, (bytes, bytearray, memoryview)):
            size = len(archive)
        else:
            size = os.fstat(archive.fileno()).st_size - archive.tell()
        self.check_upload(size)
        path = "/upload?" + urllib.parse.urlencode({"dest": dest})
        return self._json("POST", path, body=archive, length=size, timeout=120)["written"]

    def read_file(self, path: str, max_bytes: int) -> bytes:
        """Stream the file, refusing more than max_bytes (the service refuses first when it can)."""
        import urllib3

        query = urllib.parse.urlencode({"path": path, "max_bytes": max_bytes})
        resp = self._request("GET", "/file?" + query, timeout=120, preload=False)
        try:
            if resp.status != 200:
                raise refusal(resp.status, resp.read())
            chunks, total = [], 0
            for chunk in resp.stream(1 << 20):
                total += len(chunk)
                if total > max_bytes:
                    raise SandboxOutputLimit(f"{path} is larger than {max_bytes} bytes")
                chunks.append(chunk)
        except urllib3.exceptions.HTTPError as exc:
            resp.close()
            raise ServiceUnreachable(f"sandbox service {self.where}: {exc}") from exc
        except BaseException:
            resp.close()  # unread bytes: the connection cannot be reused
            raise
        resp.release_conn()
        return b"".join(chunks)

    def end_processes(self) -> dict:
        """End every process in the sandbox but its service; {"ended": N, "left": M} (sandboxd's /end-processes)."""
        return self._json("POST", "/end-processes", timeout=60)

    def start_browser(self, force: bool = False) -> dict:
        """Start (or find, or restart) Chromium inside the sandbox; returns its DevTools ws path.
        force: kill a running but stuck Chromium first."""
        wait = settings().browser_start_timeout
        query = urllib.parse.urlencode({"timeout": wait, **({"force": 1} if force else {})})
        return self._json("POST", f"/browser/start?{query}", timeout=wait + 30)

    def close(self) -> None:
        self._pool.close()
        if self._forward is not None:
            self._forward.close()


class ServiceSandbox(Sandbox):
    """A sandbox whose commands and files go through its sandboxd (the docker and swarm providers).

    A subclass names its provider (`provider`), says what identifies it to its engine (`ref`),
    and raises SandboxDied from `raise_if_dead` when its container or task is gone: a service
    that stops answering is checked twice (the engine may not have noticed the exit yet) and is
    otherwise an InfraError of its own, except for a command not answered in time (read
    timeout) by a sandbox found alive both times: that command timed out (`_unanswered`)."""

    provider: str

    def __init__(self, spec: SandboxSpec, name: str, host: str, port: int, token: str, socket: str | None = None,
                 workdir: str = WORKSPACE):
        self.spec, self.name, self.workdir = spec, name, workdir
        self._service = ServiceClient(host, port, token, socket=socket)

    def ref(self) -> dict:
        raise NotImplementedError

    def raise_if_dead(self, cause: BaseException) -> None:
        raise NotImplementedError

    def connection(self) -> Connection:
        return Connection(*self._service.address(), dict(self._service.headers))

    def handle(self) -> SandboxHandle:
        return SandboxHandle(provider=self.provider, name=self.name, host=self._service.host,
                             port=self._service.port, socket=self._service.socket, token=self._service.token,
                             workdir=self.workdir, spec=self.spec, ref=self.ref())

    def _service_call(self, fn, *args):
        try:
            return fn(*args)
        except ServiceUnreachable as exc:
            self.raise_if_dead(exc)
            time.sleep(0.5)  # the engine may not have noticed the exit yet
            self.raise_if_dead(exc)
            raise

    def exec(self, argv: Sequence[str], *, timeout: float | None = 60, stdin: str | bytes | None = None,
             cwd: str | None = None, env: Mapping[str, str] | None = None,
             max_output: int = DEFAULT_MAX_OUTPUT, user: str | None = None) -> ExecResult:
        if user is not None and user != "agent":
            raise SandboxUnsupported(f"the {self.provider} provider runs commands as 'agent' only, not {user!r}")
        payload = {"argv": list(argv), "timeout": timeout, "stdin": stdin, "cwd": cwd or self.workdir,
                   "env": dict(env or {}), "max_output": max_output}
        started = time.monotonic()
        try:
            return ExecResult(**self._service_call(self._service.exec, payload, timeout))
        except ServiceTimedOut as exc:  # raised only once raise_if_dead found the sandbox alive, twice
            return _unanswered(exc, time.monotonic() - started)

    def copy_in(self, root: Path, names: Sequence[str], dest: str = WORKSPACE) -> list[str]:
        # Refused for its size before anything is written; InputError for a bad name, before
        # touching the sandbox. The archive goes through a temporary file, never memory.
        self._service.check_upload(archive_size(root, names))
        with archive_file(root, names) as (archive, _):
            return self._service_call(self._service.upload, archive, dest)

    def read_file(self, path: str, *, max_bytes: int = DEFAULT_MAX_READ) -> bytes:
        return self._service_call(self._service.read_file, path, max_bytes)

    def start_browser(self, force: bool = False) -> str:
        return self._service_call(self._service.start_browser, force)["ws_path"]

    def end_processes(self) -> int:
        return int(self._service_call(self._service.end_processes)["left"])

    def close(self) -> None:
        self._service.close()


def _unanswered(exc: ServiceTimedOut, seconds: float) -> ExecResult:
    """A command the live sandbox's service did not answer in time (its own timeout plus
    EXEC_GRACE_S): agent code keeps the sandbox too busy for the service to answer or to
    kill it. A timeout of that command, the agent's outcome; sandboxd still kills it when
    it gets the CPU to."""
    return ExecResult(exit_code=137, stdout="", timed_out=True, duration=seconds,
                      stderr=f"[no answer from the sandbox within {exc.seconds or 0:.0f}s: it is alive but too busy "
                             "with its own processes to answer; the command is killed when it gets to it]\n")
