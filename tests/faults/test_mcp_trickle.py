"""Issue 29 item 9 (MCP preflight): a url MCP server that trickles its replies ends the preflight at its timeout.

Before, a server sending a byte every few seconds kept every read of the SDK's HTTP client alive: the
session's request timeout ended `initialize`, but closing the session (its DELETE, trickled too) waited on,
and the preflight was held 277 s past a 120 s timeout. The server is a real HTTP server of the test's speaking
MCP's streamable HTTP as far as its headers (the session id comes at once, the body never ends); the run is the
real `harness run` with `[mcp.slow] timeout = 3`."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helpers.e2e import containers_of, explain, harness, no_traceback, out_dir, replay_dataset

TIMEOUT_S = 3
BYTE_EVERY_S = 0.5


class Trickle(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _trickle(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Mcp-Session-Id", "trickled")
        self.end_headers()
        try:
            while not self.server.stopping.is_set():  # type: ignore[attr-defined]
                self.wfile.write(b":")
                self.wfile.flush()
                time.sleep(BYTE_EVERY_S)
        except OSError:
            pass

    do_POST = do_DELETE = do_GET = _trickle  # noqa: N815

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def trickling_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    server.stopping = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.stopping.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


@pytest.mark.docker
def test_a_trickling_url_server_ends_the_preflight_at_its_timeout(tmp_path, trickling_server, reliability):
    data, config = replay_dataset(tmp_path / "data", [("q0", "What is 0?", "0")],
                                  lambda iid: [{"content": "<solution>0</solution>"}])
    config.write_text(config.read_text() + f'\n[mcp.slow]\nurl = "{trickling_server}"\ntimeout = {TIMEOUT_S}\n')
    out = out_dir(tmp_path)
    started = time.monotonic()
    try:
        proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                       timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the preflight was still waiting on the trickling server after 90 s (its timeout: {TIMEOUT_S} s)")
    seconds = time.monotonic() - started
    assert proc.returncode == 2, explain(proc)
    assert f"MCP server 'slow' did not finish its tool listing within its timeout of {TIMEOUT_S} s" in proc.stderr, \
        explain(proc)
    no_traceback(proc)
    assert containers_of(out) == [] and not (out / "output.jsonl").exists()
    reliability.record("url MCP server trickling a byte every 0.5 s (timeout 3 s)", "exit 2 naming it",
                       seconds=seconds)
