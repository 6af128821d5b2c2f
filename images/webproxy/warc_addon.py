"""mitmproxy addon of the harness's web proxy (harness/sandbox/docker/webproxy.py starts it).

HARNESS_WEB_MODE=record: every exchange is appended to /data/web.warc.gz as a WARC request record and
a response record (warcio; one gzip member each, flushed at once), the response carrying
WARC-Harness-Instance (INSTANCE/ATTEMPT: /tags/CLIENT_ADDRESS, written by the harness when the
sandbox with that address starts), WARC-Harness-Key (rules.request_key), WARC-Harness-Timing (the
request's start, the response's end, seconds) and WARC-Harness-Blocked when rules.blocked saw a wall.
HARNESS_WEB_MODE=replay: the archives under /archives are indexed by WARC-Harness-Key; a request is
answered from them (the n-th identical request gets the n-th recording, the last one repeated after)
and never goes upstream; an unrecorded one gets a 404 error page. Each answer says which it was in
X-Harness-Web: hit | miss (and X-Harness-Web-Blocked: MARKER for a wall), which the browser's side
traces. Prints "ready" once listening.
"""

from __future__ import annotations

import glob
import html
import io
import json
import os
import sys
import time
from collections import defaultdict

from mitmproxy import http
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

sys.path.insert(0, os.path.dirname(__file__))
from rules import blocked, request_key  # noqa: E402

MARK = "x-harness-web"
MODE = os.environ.get("HARNESS_WEB_MODE", "record")
OUT = "/data/web.warc.gz"
HOP = {"transfer-encoding", "connection", "keep-alive", "proxy-connection", "content-length"}


def _headers(pairs) -> list[tuple[str, str]]:
    return [(k, v) for k, v in pairs if k.lower() not in HOP]


def _instance(flow: http.HTTPFlow) -> str:
    try:
        with open(f"/tags/{flow.client_conn.peername[0].removeprefix('::ffff:')}") as fh:
            return fh.read().strip()
    except OSError:
        return ""


class Recorder:
    def __init__(self) -> None:
        self.out = open(OUT, "ab")  # noqa: SIM115 - open for the proxy's life
        self.writer = WARCWriter(self.out, gzip=True)

    def request(self, flow: http.HTTPFlow) -> None:
        flow.metadata["harness_instance"] = _instance(flow)

    def response(self, flow: http.HTTPFlow) -> None:
        req, resp = flow.request, flow.response
        assert resp is not None
        body = resp.raw_content or b""
        key = request_key(req.method, req.url, req.raw_content or b"")
        wall = blocked(resp.status_code, resp.headers.get("content-type", ""), resp.get_content(strict=False) or b"")
        warc = {"WARC-Harness-Key": key, "WARC-Harness-Instance": flow.metadata.get("harness_instance", ""),
                "WARC-Harness-Timing": json.dumps({"start": req.timestamp_start,
                                                   "end": resp.timestamp_end or time.time()})}
        if flow.server_conn.peername:
            warc["WARC-IP-Address"] = flow.server_conn.peername[0]
        if wall:
            warc["WARC-Harness-Blocked"] = wall
            resp.headers["X-Harness-Web-Blocked"] = wall
        response = self.writer.create_warc_record(
            req.url, "response", payload=io.BytesIO(body), warc_headers_dict=warc,
            http_headers=StatusAndHeaders(
                f"{resp.status_code} {resp.reason}",
                _headers(resp.headers.items(multi=True)) + [("Content-Length", str(len(body)))], protocol="HTTP/1.1"))
        request = self.writer.create_warc_record(
            req.url, "request", payload=io.BytesIO(req.raw_content or b""),
            warc_headers_dict={"WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID"),
                               "WARC-Harness-Instance": warc["WARC-Harness-Instance"]},
            http_headers=StatusAndHeaders(f"{req.method} {req.path} HTTP/1.1",
                                          _headers(req.headers.items(multi=True)), protocol=""))
        self.writer.write_record(request)
        self.writer.write_record(response)
        self.out.flush()


class Replayer:
    def __init__(self) -> None:
        self.recorded: dict[str, list[tuple[int, str, list, bytes, str]]] = defaultdict(list)
        self.served: dict[str, int] = defaultdict(int)
        for path in sorted(glob.glob("/archives/**/*.warc.gz", recursive=True)):
            with open(path, "rb") as fh:
                for record in ArchiveIterator(fh):
                    if record.rec_type != "response" or not record.rec_headers.get_header("WARC-Harness-Key"):
                        continue
                    head = record.http_headers
                    self.recorded[record.rec_headers.get_header("WARC-Harness-Key")].append((
                        int(head.get_statuscode()), head.statusline.split(" ", 1)[-1], head.headers,
                        record.raw_stream.read(), record.rec_headers.get_header("WARC-Harness-Blocked") or ""))

    def request(self, flow: http.HTTPFlow) -> None:
        req = flow.request
        key = request_key(req.method, req.url, req.raw_content or b"")
        found = self.recorded.get(key)
        if not found:
            page = (f"<html><head><title>Not recorded</title></head><body><h1>Not recorded</h1><p>This harness "
                    f"run replays a recorded web; {html.escape(req.method)} {html.escape(req.url)} was never "
                    "recorded, so it cannot be shown.</p></body></html>")
            flow.response = http.Response.make(404, page.encode(), {"Content-Type": "text/html; charset=utf-8",
                                                                    "X-Harness-Web": "miss"})
            return
        status, reason, headers, body, wall = found[min(self.served[key], len(found) - 1)]
        self.served[key] += 1
        response = http.Response.make(status, b"")
        for name, value in _headers(headers):
            response.headers.add(name, value)
        response.reason = reason
        response.raw_content = body
        response.headers["Content-Length"] = str(len(body))
        response.headers[MARK] = "hit"
        if wall:
            response.headers["X-Harness-Web-Blocked"] = wall
        flow.response = response


class Ready:
    def running(self) -> None:
        print("ready", flush=True)


addons = [Recorder() if MODE == "record" else Replayer(), Ready()]
