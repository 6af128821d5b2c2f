"""Issue 29 item 9 (viewer): `harness view` answers only requests naming it as it serves.

Before, it answered any `Host` header: a page on another site whose name was rebound to 127.0.0.1 (DNS
rebinding) is same-origin with itself, so the visitor's browser would let it read /api/data and every trace
(the request names the attacker's host). A real viewer server over a real run directory, spoken to over HTTP."""

from __future__ import annotations

import http.client

import pytest

from harness.report.view import ViewServer
from tests.test_html_report import make_run_dir


def _get(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("host", ["rebind.example:{port}", "rebind.example", "127.0.0.1.nip.io:{port}",
                                  "localhost:1", "", None])
def test_the_viewer_refuses_a_host_it_does_not_serve(tmp_path, host):
    run = make_run_dir(tmp_path / "run-a", 3)
    with ViewServer([run]) as server:
        port = server.httpd.server_address[1]
        given = host.format(port=port) if host is not None else None
        for path in ("/api/data", "/api/trace?run=0&id=task-0001", "/api/version", "/"):
            status, body = _get(port, path, given)
            assert status == 421, (path, given, status)
            assert b"task-0001" not in body and str(tmp_path).encode() not in body, body[:200]


def test_the_viewer_answers_its_own_names(tmp_path):
    run = make_run_dir(tmp_path / "run-a", 3)
    with ViewServer([run]) as server:
        port = server.httpd.server_address[1]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            status, body = _get(port, "/api/data", host)
            assert status == 200 and b"task-0001" in body, (host, status)
