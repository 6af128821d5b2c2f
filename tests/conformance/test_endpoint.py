"""Conformance: the sandbox's service endpoint (`connection()`) and its browser (`start_browser()`)."""

from __future__ import annotations

import base64
import json
import os
import socket
import urllib.error
import urllib.request

import pytest

from harness.sandbox import registry
from harness.sandbox.contract import Connection


def get(conn: Connection, path: str, headers=None, timeout: float = 10) -> tuple[int, bytes]:
    req = urllib.request.Request(conn.url(path), headers=dict(conn.headers if headers is None else headers))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_health_answers_with_the_connection_headers_only(sandbox):
    conn = sandbox.connection()
    assert (conn.host, conn.port) == sandbox.endpoint
    status, body = get(conn, "/health")
    assert status == 200 and json.loads(body) == {"ok": True}
    assert conn.headers, "a sandbox's service must require credentials"
    assert get(conn, "/health", headers={})[0] == 401
    wrong = {key: value[:-1] + ("x" if value[-1:] != "x" else "y") for key, value in conn.headers.items()}
    assert get(conn, "/health", headers=wrong)[0] == 401


def test_handle_names_the_same_endpoint(sandbox, provider):
    handle = sandbox.handle()
    conn = sandbox.connection()
    assert type(registry.get_provider(handle.provider)) is type(provider)  # another process finds its provider
    assert handle.name == sandbox.name
    if handle.socket is None:
        assert (handle.host, handle.port) == (conn.host, conn.port)
    else:  # the service's Unix socket on this machine; TCP-only clients get a loopback port forwarded to it
        with socket.socket(socket.AF_UNIX) as unix:
            assert unix.connect_ex(handle.socket) == 0 and conn.host == "127.0.0.1"
    assert handle.token in conn.headers.values()


# ------------------------------------------------------------------- the browser
def cdp_call(conn: Connection, ws_path: str, method: str, timeout: float = 15) -> dict:
    """One Chrome DevTools Protocol call over a WebSocket opened through the connection
    (a minimal client: one masked text frame out, text frames in until our answer)."""
    with socket.create_connection((conn.host, conn.port), timeout=timeout) as sock:
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in conn.headers.items())
        sock.sendall((f"GET {ws_path} HTTP/1.1\r\nHost: {conn.host}:{conn.port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      f"{extra}\r\n").encode())
        reader = sock.makefile("rb")
        status = reader.readline()
        assert b" 101 " in status, status
        while reader.readline() not in (b"\r\n", b""):
            pass
        payload = json.dumps({"id": 1, "method": method}).encode()
        mask = os.urandom(4)
        assert len(payload) < 126  # a one-byte length is enough for our calls
        size = bytes([0x80 | len(payload)])
        sock.sendall(b"\x81" + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        while True:
            head = reader.read(2)
            assert len(head) == 2, "the WebSocket closed before an answer"
            length = head[1] & 0x7F
            if length == 126:
                length = int.from_bytes(reader.read(2), "big")
            elif length == 127:
                length = int.from_bytes(reader.read(8), "big")
            data = reader.read(length)
            if head[0] & 0x0F == 1:
                message = json.loads(data)
                if message.get("id") == 1:
                    return message


@pytest.mark.browser
def test_browser_starts_and_is_reachable_through_the_connection(fresh):
    ws_path = fresh.start_browser()
    assert ws_path.startswith("/devtools/browser/")
    conn = fresh.connection()
    status, body = get(conn, "/json/version")
    assert status == 200
    version = json.loads(body)
    assert version["webSocketDebuggerUrl"].endswith(ws_path)
    assert "Browser" in version
    assert get(conn, "/json/version", headers={})[0] == 401  # DevTools is behind the token too
    answer = cdp_call(conn, ws_path, "Browser.getVersion")
    assert answer["result"]["product"] == version["Browser"]
    assert fresh.start_browser() == ws_path  # running already: the same browser
    # force: a new browser, reachable the same way.
    restarted = fresh.start_browser(force=True)
    assert restarted.startswith("/devtools/browser/") and restarted != ws_path
    assert json.loads(get(conn, "/json/version")[1])["webSocketDebuggerUrl"].endswith(restarted)
    assert "result" in cdp_call(conn, restarted, "Browser.getVersion")
    assert fresh.shell("echo alive").stdout == "alive\n"
