"""sandboxd's protocol, in process and without Docker.

The in-container service (images/sandbox/sandboxd.py) is loaded as a module
and its asyncio server runs on 127.0.0.1 in a background thread; requests go over real HTTP.
The host is not a sandbox: commands run as the test's user, and sandboxd's default cwd
(/workspace) does not exist here, so every command passes a cwd of its own.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http.client
import importlib.util
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

import harness
from tests.helpers.wait import wait_for

SANDBOXD = Path(harness.__file__).parents[1] / "images" / "sandbox" / "sandboxd.py"
TOKEN = "test-" + secrets.token_urlsafe(16)


def _load_sandboxd():
    """Import sandboxd.py under its own module name with our token in the environment
    (it pops the token at import); the environment is restored afterwards."""
    saved = os.environ.get("HARNESS_SANDBOX_TOKEN")
    os.environ["HARNESS_SANDBOX_TOKEN"] = TOKEN
    try:
        spec = importlib.util.spec_from_file_location("sandboxd_under_test", SANDBOXD)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module._token_left_in_env = "HARNESS_SANDBOX_TOKEN" in os.environ
    finally:
        if saved is None:
            os.environ.pop("HARNESS_SANDBOX_TOKEN", None)
        else:
            os.environ["HARNESS_SANDBOX_TOKEN"] = saved
    return module


class Server:
    """sandboxd's `handle` served by an event loop of its own in a daemon thread."""

    def __init__(self, module):
        self.module = module
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(asyncio.start_server(module.handle, "127.0.0.1", 0))
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, name="sandboxd-under-test", daemon=True)
        self.thread.start()
        assert ready.wait(10), "sandboxd's server did not start"

    def close(self):
        """Stop serving, end the connections still open (a keep-alive one waits for its next request), then
        the loop: a handler left pending when the loop stops is destroyed later, in another test's time,
        as an unraisable GeneratorExit (seen once in a fresh-clone run, after a pooled client's test)."""

        async def drain() -> None:
            self.server.close()
            handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(drain(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    # ---------------------------------------------------------------- clients
    def request(self, method: str, path: str, body: bytes | None = None, *, token: str | None = TOKEN,
                timeout: float = 30) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers={} if token is None else {"X-Harness-Token": token})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def json(self, method: str, path: str, body: bytes | None = None, **kwargs) -> tuple[int, dict]:
        status, _, data = self.request(method, path, body, **kwargs)
        return status, json.loads(data)

    def exec(self, timeout_http: float = 30, **req) -> dict:
        status, body = self.json("POST", "/exec", json.dumps(req).encode(), timeout=timeout_http)
        assert status == 200, body
        return body

    def raw(self, data: bytes, timeout: float = 10) -> bytes:
        """Send raw bytes on a fresh connection; everything the server answers until it closes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as conn:
            conn.sendall(data)
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)


@pytest.fixture(scope="module")
def sandboxd():
    return _load_sandboxd()


@pytest.fixture(scope="module")
def server(sandboxd):
    srv = Server(sandboxd)
    yield srv
    srv.close()


@pytest.fixture
def work():
    """A scratch directory under /tmp (the only upload destination allowed outside /workspace)."""
    path = Path(tempfile.mkdtemp(prefix="sandboxd-test-", dir="/tmp")).resolve()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _split_response(raw: bytes) -> tuple[int, dict, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
    return int(lines[0].split()[1]), headers, body


def _procs_with(marker: str) -> list[int]:
    """PIDs on this host whose command line contains marker."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(name))
    return found


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# ------------------------------------------------------------------- the token
def test_import_pops_the_token_from_the_environment(sandboxd):
    assert sandboxd.TOKEN == TOKEN
    assert sandboxd._token_left_in_env is False


@pytest.mark.parametrize("token", [None, "", "wrong", TOKEN + "x"],
                         ids=["none", "empty", "wrong", "one-more-character"])  # the same on every xdist worker
def test_requests_without_the_right_token_get_401(server, token):
    status, headers, body = server.request("GET", "/health", token=token)
    assert status == 401
    assert "token" in json.loads(body)["error"].lower()
    assert headers.get("connection") == "close"


def test_health_answers_with_the_token_and_connections_stay_alive(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for _ in range(3):  # three requests on one kept-alive connection
            conn.request("GET", "/health", headers={"X-Harness-Token": TOKEN})
            resp = conn.getresponse()
            assert (resp.status, json.loads(resp.read())) == (200, {"ok": True})
    finally:
        conn.close()


def test_a_stranger_is_answered_before_it_sends_its_body(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as conn:
        conn.sendall(b"POST /exec HTTP/1.1\r\nHost: x\r\nContent-Length: 500000000\r\n\r\n")
        assert conn.recv(100).startswith(b"HTTP/1.1 401")


def test_commands_do_not_see_the_token(server, work):
    result = server.exec(argv=["env"], cwd=str(work), timeout=10)
    assert result["exit_code"] == 0 and "PATH=" in result["stdout"]
    assert TOKEN not in result["stdout"]


# ------------------------------------------------------------------- /exec
def test_exec_output_streams_exit_code_env_and_cwd(server, work):
    result = server.exec(argv=["bash", "-c", 'echo "out $FOO $(pwd)"; echo err >&2; exit 3'],
                         env={"FOO": "bar"}, cwd=str(work), timeout=10)
    assert result["exit_code"] == 3 and result["signal"] is None and not result["timed_out"]
    assert result["stdout"] == f"out bar {work}\n"
    assert result["stderr"] == "err\n"
    assert result["duration"] >= 0


def test_exec_stdin_as_text_and_as_base64_bytes(server, work):
    text = server.exec(argv=["cat"], stdin="héllo\n", cwd=str(work), timeout=10)
    assert text["stdout"] == "héllo\n"
    payload = bytes(range(256)) * 64
    digest = server.exec(argv=["sha256sum"], stdin_b64=base64.b64encode(payload).decode(), cwd=str(work), timeout=10)
    assert digest["stdout"].split()[0] == hashlib.sha256(payload).hexdigest()
    # Without stdin a command reads EOF at once (not the server's own stdin).
    assert server.exec(argv=["cat"], cwd=str(work), timeout=10)["stdout"] == ""


def test_exec_command_not_found_is_127(server, work):
    result = server.exec(argv=["no-such-command-" + secrets.token_hex(4)], cwd=str(work), timeout=10)
    assert result["exit_code"] == 127 and result["signal"] is None
    assert "No such file or directory" in result["stderr"]


def test_exec_not_executable_is_126(server, work):
    script = work / "script.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o644)
    result = server.exec(argv=[str(script)], cwd=str(work), timeout=10)
    assert result["exit_code"] == 126 and result["stdout"] == ""
    assert "Permission denied" in result["stderr"]
    assert server.exec(argv=[str(work)], cwd=str(work), timeout=10)["exit_code"] == 126  # a directory


@pytest.mark.parametrize("failure", [OSError(11, "Resource temporarily unavailable"),
                                     RuntimeError("can't start new thread")], ids=["fork", "thread"])
def test_a_full_process_limit_is_named_however_the_start_fails(server, sandboxd, work, monkeypatch, failure):
    """A full pids limit fails a command's start in the fork (EAGAIN) or, first, in the child watcher's thread
    (RuntimeError): the agent reads one cause either way (a fresh-clone run once got the thread form)."""
    async def failing_spawn(*argv, **kwargs):
        raise failure

    monkeypatch.setattr(sandboxd, "spawn", failing_spawn)
    result = server.exec(argv=["true"], cwd=str(work), timeout=10)
    assert result["exit_code"] == 126 and result["started"] is False
    assert result["stderr"] == f"true: cannot start: the sandbox's process limit is reached ({failure})\n"


def test_exec_missing_cwd_is_127(server, work):
    result = server.exec(argv=["true"], cwd=str(work / "missing"), timeout=10)
    assert result["exit_code"] == 127
    assert "no such working directory" in result["stderr"]


@pytest.mark.parametrize("argv, sig", [
    (["bash", "-c", "kill -TERM $$"], 15),
    (["python3", "-c", "import os; os.kill(os.getpid(), 9)"], 9),
])
def test_exec_killed_by_a_signal_is_128_plus_n(server, work, argv, sig):
    result = server.exec(argv=argv, cwd=str(work), timeout=10)
    assert (result["exit_code"], result["signal"], result["timed_out"]) == (128 + sig, sig, False)


def test_exec_timeout_none_runs_to_completion(server, work):
    result = server.exec(argv=["bash", "-c", "sleep 1.2; echo done"], cwd=str(work), timeout=None)
    assert (result["exit_code"], result["stdout"], result["timed_out"]) == (0, "done\n", False)
    assert result["duration"] >= 1.2


def test_exec_timeout_kills_the_whole_tree(server, work):
    marker = f"77{secrets.randbelow(10**6)}.5"
    command = (f"sleep {marker}1 & (sleep {marker}2 &) ; setsid sleep {marker}3 & "
               f"(setsid sleep {marker}4 &) ; python3 -c 'import time; time.sleep({marker}5)'")
    started = time.monotonic()
    try:
        result = server.exec(argv=["bash", "-c", command], cwd=str(work), timeout=1.0)
        assert result["timed_out"] and (result["exit_code"], result["signal"]) == (137, 9)
        assert time.monotonic() - started < 8
        wait_for(lambda: _procs_with(marker) == [], 10, "the timed-out command's processes to be gone")
    finally:
        for pid in _procs_with(marker):
            os.kill(pid, 9)


def test_exec_ends_with_its_main_process_while_a_background_child_holds_the_pipes(server, work):
    marker = f"66{secrets.randbelow(10**6)}.5"
    try:
        for i in range(3):  # asyncio's Process.wait() returns early at random: try more than once
            started = time.monotonic()
            result = server.exec(argv=["bash", "-c", f"sleep {marker}{i} & echo hi"], cwd=str(work), timeout=20)
            assert (result["exit_code"], result["stdout"], result["timed_out"]) == (0, "hi\n", False)
            assert time.monotonic() - started < 3
        assert len(_procs_with(marker)) == 3  # not killed: only a timeout kills what a command left behind
    finally:
        for pid in _procs_with(marker):
            os.kill(pid, 9)


def test_exec_background_output_after_the_answer_is_drained_not_blocked(server, work):
    # After the answer, a background child writing lots of output must not block on a full pipe.
    done = work / "done"
    result = server.exec(argv=["bash", "-c", f"(sleep 0.5; head -c 3000000 /dev/zero; touch {done}) & echo started"],
                         cwd=str(work), timeout=30)
    assert result["stdout"] == "started\n"
    deadline = time.monotonic() + 10
    while not done.exists():
        assert time.monotonic() < deadline, "the background writer is blocked"
        time.sleep(0.05)


def test_exec_timeout_applies_while_the_command_does_not_read_its_stdin(server, work):
    # A command that never reads stdin must not make sandboxd wait forever writing it.
    started = time.monotonic()
    result = server.exec(argv=["sleep", "30"], stdin="x" * (4 << 20), cwd=str(work), timeout=1.0, timeout_http=20)
    assert result["timed_out"] and result["exit_code"] == 137
    assert time.monotonic() - started < 8


def test_exec_output_cap_marks_truncation(server, work):
    result = server.exec(argv=["bash", "-c", "head -c 300000 /dev/zero | tr '\\0' a; echo e >&2"],
                         cwd=str(work), timeout=10, max_output=1000)
    assert result["stdout_truncated"] and not result["stderr_truncated"]
    assert result["stdout"].startswith("a" * 1000) and "299000 more bytes" in result["stdout"]
    assert len(result["stdout"]) < 1200 and result["stderr"] == "e\n"


def test_exec_max_output_is_clamped_to_the_service_cap(server, sandboxd, work, monkeypatch):
    monkeypatch.setattr(sandboxd, "MAX_OUTPUT_CAP", 500)
    result = server.exec(argv=["bash", "-c", "head -c 5000 /dev/zero | tr '\\0' b"], cwd=str(work), timeout=10,
                         max_output=10**12)
    assert result["stdout_truncated"]
    assert result["stdout"].startswith("b" * 500) and not result["stdout"].startswith("b" * 501)
    assert "4500 more bytes" in result["stdout"]


def test_exec_non_utf8_output_is_decoded_with_replacement(server, work):
    result = server.exec(argv=["printf", "ok\\377\\376end"], cwd=str(work), timeout=10)
    assert result["stdout"] == "ok\ufffd\ufffdend"


def test_exec_as_another_user_is_unsupported(server, sandboxd, work):
    status, body = server.json("POST", "/exec", json.dumps(
        {"argv": ["true"], "cwd": str(work), "user": sandboxd.USER + "-other"}).encode())
    assert (status, body["code"]) == (400, "unsupported")
    assert server.exec(argv=["true"], cwd=str(work), user=sandboxd.USER)["exit_code"] == 0


@pytest.mark.parametrize("body", [
    b"not json",
    b'["a", "list"]',
    b'{"argv": []}',
    b'{"argv": "true"}',
    b'{"argv": ["true"], "timeout": "soon"}',
    b'{"argv": ["true"], "max_output": "lots"}',
    b'{"argv": ["true"], "env": ["A=1"]}',
    b'{"argv": ["cat"], "stdin_b64": "***"}',
])
def test_exec_malformed_requests_are_400_bad_request(server, body):
    status, answer = server.json("POST", "/exec", body)
    assert (status, answer["code"]) == (400, "bad_request"), answer
    assert answer["error"]


def test_unknown_route_is_404(server):
    status, answer = server.json("GET", "/nowhere")
    assert (status, answer["code"]) == (404, "bad_request")


# ------------------------------------------------------------------- /file
def _file(server, path, max_bytes=None, **kwargs):
    query = {"path": str(path)} | ({} if max_bytes is None else {"max_bytes": str(max_bytes)})
    return server.request("GET", "/file?" + urllib.parse.urlencode(query), **kwargs)


def test_file_streams_the_exact_bytes(server, work):
    data = secrets.token_bytes(3 * 1024 * 1024 + 17)  # several chunks
    (work / "blob").write_bytes(data)
    status, headers, body = _file(server, work / "blob")
    assert status == 200 and headers["content-type"] == "application/octet-stream"
    assert int(headers["content-length"]) == len(data) and body == data
    (work / "empty").write_bytes(b"")
    assert _file(server, work / "empty")[::2] == (200, b"")


def test_file_over_max_bytes_is_413_too_large(server, work):
    (work / "blob").write_bytes(b"x" * 1001)
    status, _, body = _file(server, work / "blob", max_bytes=1000)
    assert (status, json.loads(body)["code"]) == (413, "too_large")
    assert _file(server, work / "blob", max_bytes=1001)[::2] == (200, b"x" * 1001)


def test_file_missing_is_404_not_found(server, work):
    status, _, body = _file(server, work / "missing")
    assert (status, json.loads(body)["code"]) == (404, "not_found")


def test_file_directory_is_is_a_directory(server, work):
    status, _, body = _file(server, work)
    assert (status, json.loads(body)["code"]) == (400, "is_a_directory")


def test_file_permission_is_403_permission(server, sandboxd, work, monkeypatch):
    # The tests run as root here (no permission errors on the host): the open is refused for us.
    secret = work / "secret"
    secret.write_text("s")
    real_open = os.open

    def refusing_open(path, *args, **kwargs):
        if os.fspath(path) == str(secret):
            raise PermissionError(13, "Permission denied", str(secret))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(sandboxd.os, "open", refusing_open)
    status, _, body = _file(server, secret)
    assert (status, json.loads(body)["code"]) == (403, "permission")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_file_that_is_not_regular_is_refused_promptly(server, work, kind):
    if kind == "fifo":
        path = work / "pipe"
        os.mkfifo(path)  # opening it for reading would wait for a writer forever
    else:
        path = Path("/dev/zero")  # endless
    started = time.monotonic()
    status, _, body = _file(server, path, timeout=10)
    assert (status, json.loads(body)["code"]) == (400, "bad_request")
    assert "not a regular file" in json.loads(body)["error"]
    assert time.monotonic() - started < 5
    assert server.request("GET", "/health")[0] == 200


@pytest.mark.parametrize("max_bytes", ["many", "1e3"])
def test_file_bad_max_bytes_is_400(server, work, max_bytes):
    (work / "f").write_text("x")
    status, _, body = _file(server, work / "f", max_bytes=max_bytes)
    assert (status, json.loads(body)["code"]) == (400, "bad_request")


# ------------------------------------------------------------------- /upload
def test_upload_writes_files_and_folders(server, work):
    body = _tar({"a.txt": b"alpha", "sub/b.bin": bytes(range(256))})
    status, answer = server.json("POST", "/upload?" + urllib.parse.urlencode({"dest": str(work / "in")}), body)
    assert status == 200 and sorted(answer["written"]) == ["a.txt", "sub/b.bin"]
    assert (work / "in" / "a.txt").read_bytes() == b"alpha"
    assert (work / "in" / "sub" / "b.bin").read_bytes() == bytes(range(256))


@pytest.mark.parametrize("name", ["../escape", "/tmp/absolute", "sub/../../escape"])
def test_upload_refuses_members_that_escape_and_writes_nothing(server, work, name):
    body = _tar({"fine.txt": b"ok", name: b"x"})
    status, answer = server.json("POST", "/upload?" + urllib.parse.urlencode({"dest": str(work / "in")}), body)
    assert (status, answer["code"]) == (400, "bad_request")
    assert not (work / "in" / "fine.txt").exists() and not (work / "escape").exists()


def test_upload_refuses_links_bad_archives_and_destinations_outside(server, work):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        link = tarfile.TarInfo("link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    dest = urllib.parse.urlencode({"dest": str(work)})
    status, answer = server.json("POST", "/upload?" + dest, buf.getvalue())
    assert (status, answer["code"]) == (400, "bad_request") and not (work / "link").exists()
    status, answer = server.json("POST", "/upload?" + dest, b"this is not a tar archive" * 40)
    assert (status, answer["code"]) == (400, "bad_request") and "tar" in answer["error"]
    status, answer = server.json("POST", "/upload?dest=/etc", _tar({"x": b"x"}))
    assert (status, answer["code"]) == (400, "bad_request") and "outside" in answer["error"]
    assert not Path("/etc/x").exists()


def test_upload_into_a_file_is_refused_typed(server, work):
    (work / "f").write_text("a file")
    status, answer = server.json("POST", "/upload?" + urllib.parse.urlencode({"dest": str(work / "f")}),
                                 _tar({"x": b"x"}))
    assert status == 400 and answer["code"] in ("bad_request", "not_found")
    assert (work / "f").read_text() == "a file"


def test_upload_over_a_fifo_is_refused_promptly(server, work):
    os.mkfifo(work / "pipe")  # opening it for writing would wait for a reader forever
    started = time.monotonic()
    status, answer = server.json("POST", "/upload?" + urllib.parse.urlencode({"dest": str(work)}),
                                 _tar({"pipe": b"data"}), timeout=10)
    assert (status, answer["code"]) == (400, "bad_request")
    assert time.monotonic() - started < 5
    assert server.request("GET", "/health")[0] == 200


# ------------------------------------------------------------------- request framing
def test_oversize_content_length_is_413_too_large_without_reading_the_body(server, sandboxd):
    size = sandboxd.MAX_BODY + 1
    raw = server.raw(b"POST /upload?dest=/tmp HTTP/1.1\r\nHost: x\r\nX-Harness-Token: " + TOKEN.encode()
                     + b"\r\nContent-Length: %d\r\n\r\n" % size)
    status, headers, body = _split_response(raw)
    assert status == 413 and headers.get("connection") == "close"
    assert int(headers["content-length"]) == len(body)
    answer = json.loads(body)
    assert answer["code"] == "too_large" and str(size) in answer["error"]


@pytest.mark.parametrize("length", [b"abc", b"-5", b"12x"])
def test_malformed_content_length_is_400_bad_request(server, length):
    raw = server.raw(b"POST /exec HTTP/1.1\r\nHost: x\r\nX-Harness-Token: " + TOKEN.encode()
                     + b"\r\nContent-Length: " + length + b"\r\n\r\n")
    status, headers, body = _split_response(raw)
    assert status == 400 and json.loads(body)["code"] == "bad_request"
    assert server.request("GET", "/health")[0] == 200


# ------------------------------------------------------------------- connections: timeouts and caps
def _limits(monkeypatch, sandboxd, **values):
    """Smaller connection limits for one test (sandboxd reads them at each use)."""
    for name, value in values.items():
        monkeypatch.setattr(sandboxd, name, value)


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes sock (EOF or reset) within `seconds`; what it answers first is skipped."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if sock.recv(65536) == b"":
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
    return False


def _ask(sock: socket.socket, method: str = "GET", path: str = "/health", body: bytes = b"",
         timeout: float = 10) -> tuple[int, bytes]:
    """One request with the token on a kept-alive raw connection; (status, body)."""
    sock.settimeout(timeout)
    sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nX-Harness-Token: {TOKEN}\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before an answer: {data!r}")
        data += chunk
    status, headers, rest = _split_response(data)
    while len(rest) < int(headers.get("content-length", 0)):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the middle of an answer")
        rest += chunk
    return status, rest


def test_a_new_connection_that_sends_nothing_is_closed_after_the_first_request_timeout(server, sandboxd,
                                                                                      monkeypatch):
    _limits(monkeypatch, sandboxd, FIRST_REQUEST_TIMEOUT_S=0.5)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as silent:
        started = time.monotonic()
        assert _closed_within(silent, 5), "a silent new connection was kept open"
        assert 0.3 < time.monotonic() - started < 3
    assert server.request("GET", "/health")[0] == 200


def test_a_new_connection_trickling_its_headers_is_closed_at_the_same_deadline(server, sandboxd, monkeypatch):
    _limits(monkeypatch, sandboxd, FIRST_REQUEST_TIMEOUT_S=0.6)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as slow:
        started = time.monotonic()
        slow.sendall(b"GET /health HTTP/1.1\r\n")
        closed = False
        for i in range(60):  # one header byte every 0.1 s: each read is quick, the whole head never ends
            try:
                slow.sendall(b"X-Pad: y\r\n"[i % 10: i % 10 + 1])
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if _closed_within(slow, 0.1):
                closed = True
                break
        assert closed and time.monotonic() - started < 3


def test_an_authenticated_connection_outlives_the_first_request_timeout_until_the_idle_timeout(
        server, sandboxd, monkeypatch):
    _limits(monkeypatch, sandboxd, FIRST_REQUEST_TIMEOUT_S=0.3, IDLE_TIMEOUT_S=1.5)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as kept:
        assert _ask(kept)[0] == 200
        time.sleep(0.8)  # longer than a new connection may wait for its first request
        assert _ask(kept)[0] == 200
        started = time.monotonic()
        assert _closed_within(kept, 6), "an idle authenticated connection was never closed"
        assert 1.0 < time.monotonic() - started < 4


def test_unauthenticated_connections_over_the_cap_are_closed_oldest_first_and_the_token_gets_through(
        server, sandboxd, monkeypatch):
    _limits(monkeypatch, sandboxd, MAX_UNAUTHENTICATED=8, FIRST_REQUEST_TIMEOUT_S=60)
    strangers = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(40)]
    try:
        # The oldest are closed as the newer ones arrive (each waited for); the newest are kept.
        assert all(_closed_within(s, 10) for s in strangers[:30])
        assert not any(_closed_within(s, 0.1) for s in strangers[-6:])
        started = time.monotonic()
        status, _ = server.json("GET", "/health", timeout=5)  # a new connection, with the token
        assert status == 200 and time.monotonic() - started < 2
        wait_for(lambda: sum(not _closed_within(s, 0.05) for s in strangers) <= 8, 10, "at most 8 strangers open")
    finally:
        for s in strangers:
            s.close()


def test_authenticated_connections_over_the_cap_close_the_least_recently_used_idle_one(server, sandboxd,
                                                                                        monkeypatch):
    _limits(monkeypatch, sandboxd, MAX_AUTHENTICATED=3)
    conns = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(5)]
    try:
        for conn in conns:
            assert _ask(conn)[0] == 200
        assert [_closed_within(c, 10) for c in conns[:2]] == [True, True]  # each waited for, up to 10 s
        assert [_closed_within(c, 0.2) for c in conns[2:]] == [False, False, False]
        for conn in conns[2:]:
            assert _ask(conn)[0] == 200
    finally:
        for conn in conns:
            conn.close()


def test_a_busy_connection_is_never_cut_and_a_newcomer_over_the_cap_is_told_503(server, sandboxd, monkeypatch,
                                                                                 work):
    _limits(monkeypatch, sandboxd, MAX_AUTHENTICATED=1)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as busy:
        assert _ask(busy)[0] == 200
        running = work / "running"
        request = json.dumps({"argv": ["bash", "-c", f"touch {running}; sleep 1"], "cwd": str(work),
                              "timeout": 10}).encode()
        busy.sendall(f"POST /exec HTTP/1.1\r\nHost: x\r\nX-Harness-Token: {TOKEN}\r\n"
                     f"Content-Length: {len(request)}\r\n\r\n".encode() + request)
        wait_for(running.exists, 10, "the busy connection's command to run")
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as newcomer:
            status, body = _ask(newcomer)
            assert status == 503 and json.loads(body)["code"] == "busy"
            assert _closed_within(newcomer, 2)
        busy.settimeout(10)
        answer = b""
        while b"exit_code" not in answer:
            chunk = busy.recv(65536)
            assert chunk, "the busy connection was cut"
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200")
    # The idle slot is free again once the server has seen the busy connection close.
    wait_for(lambda: server.request("GET", "/health")[0] == 200, 10, "a free connection slot")


def test_an_upload_is_spooled_in_chunks_not_held_in_memory(server, work):
    import tracemalloc

    size = 48 * 1024 * 1024
    archive = work / "upload.tar"
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("big.bin")
        info.size = size
        with open("/dev/zero", "rb") as zeros:
            tar.addfile(info, zeros)
    length = archive.stat().st_size
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    tracemalloc.start()
    try:
        with open(archive, "rb") as body:
            conn.request("POST", "/upload?" + urllib.parse.urlencode({"dest": str(work / "in")}), body=body,
                         headers={"X-Harness-Token": TOKEN, "Content-Length": str(length)})
            resp = conn.getresponse()
            answer = json.loads(resp.read())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        conn.close()
    assert resp.status == 200 and answer["written"] == ["big.bin"]
    assert (work / "in" / "big.bin").stat().st_size == size
    assert peak < 12 * 1024 * 1024, f"peak {peak >> 20} MiB of Python memory for a {size >> 20} MiB upload"


def test_a_refused_upload_is_answered_typed_on_a_connection_that_stays_usable(server, work):
    # The refusal comes at the first member; the 20 MB behind it are still read (and dropped).
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, size in (("../escape", 1), ("big.bin", 20 * 1024 * 1024)):
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(b"x" * size))
    dest = work / "new" / "dest"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        status, body = _ask(conn, "POST", "/upload?" + urllib.parse.urlencode({"dest": str(dest)}), buf.getvalue())
        assert status == 400 and json.loads(body)["code"] == "bad_request"
        assert _ask(conn)[0] == 200  # the same connection serves the next request
    assert not (work / "new").exists() and not (work / "escape").exists()
    # Success leaves nothing of the staging behind either.
    status, body = server.json("POST", "/upload?" + urllib.parse.urlencode({"dest": str(work)}),
                               _tar({"a.txt": b"a", "sub/b.txt": b"b"}))
    assert status == 200 and sorted(body["written"]) == ["a.txt", "sub/b.txt"]
    assert sorted(p.name for p in work.iterdir()) == ["a.txt", "sub"]


def test_an_upload_over_a_folder_or_under_a_file_is_refused_and_writes_nothing(server, work):
    (work / "taken").mkdir()
    (work / "plain").write_text("p")
    for members in ({"ok.txt": b"ok", "taken": b"x"}, {"ok.txt": b"ok", "plain/inner": b"x"}):
        status, body = server.json("POST", "/upload?" + urllib.parse.urlencode({"dest": str(work)}),
                                   _tar(members))
        assert status == 400 and body["code"] in ("bad_request", "is_a_directory"), body
        assert not (work / "ok.txt").exists()
    assert (work / "plain").read_text() == "p" and (work / "taken").is_dir()
    assert sorted(p.name for p in work.iterdir()) == ["plain", "taken"]


def test_an_upload_cut_short_is_dropped_and_the_service_goes_on(server, work):
    body = _tar({"a.txt": b"a" * 100_000})
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as conn:
        conn.sendall(b"POST /upload?" + urllib.parse.urlencode({"dest": str(work / "cut")}).encode()
                     + b" HTTP/1.1\r\nHost: x\r\nX-Harness-Token: " + TOKEN.encode()
                     + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:50_000])
        wait_for((work / "cut").exists, 10, "the upload to begin (its destination made)")
    # Cut: the upload is dropped, and with it the folder it made.
    wait_for(lambda: not (work / "cut").exists(), 10, "the cut upload to be dropped")
    assert not (work / "cut" / "a.txt").exists()
    assert server.request("GET", "/health")[0] == 200


# ------------------------------------------------------------------- as a program
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sandboxd_refuses_to_start_without_a_token():
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_SANDBOX_TOKEN"}
    env["HARNESS_SANDBOX_PORT"] = str(_free_port())
    started = time.monotonic()
    proc = subprocess.run(["python3", str(SANDBOXD)], env=env, capture_output=True, text=True, timeout=20)
    assert proc.returncode != 0
    assert "HARNESS_SANDBOX_TOKEN" in proc.stderr and "token" in proc.stderr.lower()
    assert time.monotonic() - started < 10


def test_sandboxd_serves_on_its_port_with_a_token(tmp_path):
    port = _free_port()
    env = {**os.environ, "HARNESS_SANDBOX_TOKEN": TOKEN, "HARNESS_SANDBOX_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, str(SANDBOXD)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health", headers={"X-Harness-Token": TOKEN})
                status = conn.getresponse().status
                conn.close()
                break
            except OSError:
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "sandboxd did not answer"
                time.sleep(0.05)
        assert status == 200
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/exec", body=json.dumps({"argv": ["env"], "cwd": str(tmp_path)}).encode(),
                     headers={"X-Harness-Token": TOKEN})
        result = json.loads(conn.getresponse().read())
        conn.close()
        assert result["exit_code"] == 0 and "PATH=" in result["stdout"] and TOKEN not in result["stdout"]
        # Nor can a command read it from the service's own initial environment.
        assert TOKEN.encode() not in Path(f"/proc/{proc.pid}/environ").read_bytes()
    finally:
        proc.kill()
        proc.wait()


def test_sandboxd_out_of_descriptors_neither_crashes_nor_wedges(tmp_path):
    """Accept failing with EMFILE: the token holder still gets through, and the service recovers."""
    import resource

    port = _free_port()
    env = {**os.environ, "HARNESS_SANDBOX_TOKEN": TOKEN, "HARNESS_SANDBOX_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, str(SANDBOXD)], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    strangers: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as probe:
                    assert _ask(probe)[0] == 200
                break
            except OSError:
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "sandboxd did not answer"
                time.sleep(0.05)
        limit = resource.prlimit(proc.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (10, limit[1]))  # a few descriptors left
        for _ in range(100):
            try:
                strangers.append(socket.create_connection(("127.0.0.1", port), timeout=1))
            except OSError:
                break
        # Out of descriptors: the server took the backlog in, shedding all but the few it can hold.
        wait_for(lambda: sum(_closed_within(s, 0.01) for s in strangers) >= len(strangers) - 10, 15,
                 "the server to shed the strangers it has no descriptors for")
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as harness_conn:
            assert _ask(harness_conn, timeout=5)[0] == 200
        assert time.monotonic() - started < 4 and proc.poll() is None
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, limit)
        for s in strangers:
            s.close()

        def echo() -> str | bool:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as harness_conn:
                status, body = _ask(harness_conn, "POST", "/exec",
                                    json.dumps({"argv": ["echo", "ok"], "cwd": str(tmp_path)}).encode())
            return status == 200 and json.loads(body)["stdout"]

        assert wait_for(echo, 15, "the service to run a command again") == "ok\n"  # it recovers
        proc.kill()
        assert b"sandboxd: accept: Too many open files" in proc.communicate(timeout=10)[1]  # EMFILE was met
    finally:
        for s in strangers:
            s.close()
        proc.kill()
        proc.wait()


def test_the_browser_start_waits_as_long_as_the_harness_setting_says(server, sandboxd, work, monkeypatch):
    """The harness sends HARNESS_BROWSER_START_TIMEOUT (a loaded host's Chromium missed sandboxd's
    fixed 30 s in a fresh-clone run); sandboxd waits that long, then says how long it waited."""
    from harness import settings as harness_settings
    from harness.sandbox.service import SandboxRequestError, ServiceClient

    mute = work / "chromium"
    mute.write_text("#!/bin/sh\nexec sleep 120\n")  # a browser that never answers on DevTools
    mute.chmod(0o755)
    monkeypatch.setattr(sandboxd, "CHROMIUM", str(mute))
    monkeypatch.setenv("HARNESS_BROWSER_START_TIMEOUT", "2")
    harness_settings.settings.cache_clear()
    client = ServiceClient("127.0.0.1", server.port, TOKEN)
    try:
        started = time.monotonic()
        with pytest.raises(SandboxRequestError, match="did not answer within 2s"):
            client.start_browser()
        assert 2 <= time.monotonic() - started < 20
        status, body = server.json("POST", "/browser/start?timeout=nonsense")
        assert status == 400 and "bad timeout" in body["error"], body
    finally:
        client.close()
        harness_settings.settings.cache_clear()
        proc = sandboxd._browser.get("proc")
        if proc is not None and proc.returncode is None:
            sandboxd.kill_tree(proc.pid)

