"""`harness view`: the run pages as a local web app on 127.0.0.1 (stdlib http.server in a thread).

The page is the static report's (html.py) in live mode: it fetches the rows from /api/data,
polls /api/version (the size and mtime of each output.jsonl) every second and refetches when a
run wrote, and loads one instance's trace (/api/trace) only when its row is clicked, so a
5,000-instance run opens without reading 5,000 traces. Screenshots come from /api/shot,
confined to the trace's `<stem>-shots/` folder.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from harness.report import html as pages
from harness.results.layout import RunDir

SHOT_NAME = re.compile(r"^[\w.-]+\.png$")


class Viewer:
    def __init__(self, dirs: list[Path]):
        self.dirs = [Path(d) for d in dirs]
        self._lock = threading.Lock()
        self._cache: tuple[str, bytes, list[dict[str, dict]]] | None = None
        self._page = pages.render_page(data=None, mode="live", title="harness view: " + ", ".join(d.name for d in self.dirs)).encode()

    def version(self) -> str:
        parts = []
        for d in self.dirs:
            for f in (RunDir(d).output, RunDir(d).report):
                try:
                    st = f.stat()
                    parts.append(f"{st.st_size}:{st.st_mtime_ns}")
                except OSError:
                    parts.append("-")
        return "|".join(parts)

    def _current(self) -> tuple[dict, bytes]:
        """The runs' data (rows, no traces), rebuilt only when an output.jsonl or report.json changed."""
        with self._lock:
            v = self.version()
            if self._cache is None or self._cache[0] != v:
                data = pages.build_data(self.dirs, with_traces=False)
                body = json.dumps(data, separators=(",", ":"), default=str).encode()
                index = [{str(r["instance_id"]): r for r in run["rows"]} for run in data["runs"]]
                self._cache = (v, body, index)
            return self._cache[2], self._cache[1]

    def data(self) -> bytes:
        return self._current()[1]

    def _row(self, run: int, iid: str) -> dict | None:
        return self._current()[0][run].get(iid)

    def trace(self, run: int, iid: str) -> list[dict] | None:
        row = self._row(run, iid)
        if not row or not row.get("trace"):
            return None
        root = self.dirs[run]
        path = root / row["trace"]
        if not pages._inside(root, path) or not path.exists():
            return None
        return pages.read_trace(path)

    def shot(self, run: int, trace: str, name: str) -> bytes | None:
        if not SHOT_NAME.match(name):
            return None
        root = self.dirs[run]
        path = root / trace
        shot = path.with_name(path.stem + "-shots") / name
        if not pages._inside(root / "traces", shot) or not shot.is_file():
            return None
        return shot.read_bytes()


def _handler(viewer: Viewer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            url = urlparse(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            try:
                if url.path == "/":
                    return self._send(200, viewer._page, "text/html; charset=utf-8")
                if url.path == "/api/version":
                    return self._send(200, viewer.version().encode(), "text/plain")
                if url.path == "/api/data":
                    return self._send(200, viewer.data(), "application/json")
                run = int(q.get("run", "0"))
                if not 0 <= run < len(viewer.dirs):
                    return self._send(404, b"no such run", "text/plain")
                if url.path == "/api/trace":
                    events = viewer.trace(run, q.get("id", ""))
                    if events is None:
                        return self._send(404, b"null", "application/json")
                    return self._send(200, json.dumps(events, default=str).encode(), "application/json")
                if url.path == "/api/shot":
                    png = viewer.shot(run, q.get("trace", ""), q.get("name", ""))
                    if png is None:
                        return self._send(404, b"no such screenshot", "text/plain")
                    return self._send(200, png, "image/png")
            except (ValueError, OSError) as exc:
                return self._send(400, str(exc).encode(), "text/plain")
            return self._send(404, b"not found", "text/plain")

    return Handler


class ViewServer:
    """The viewer's HTTP server on 127.0.0.1, serving in a daemon thread (port 0: any free port)."""

    def __init__(self, dirs: list[Path], port: int = 0):
        self.viewer = Viewer(dirs)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self.viewer))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def start(self) -> "ViewServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "ViewServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
