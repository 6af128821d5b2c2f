"""`harness view`: the run pages as a local web app on 127.0.0.1 (stdlib http.server in a thread).

The page is the static report's (html.py) in live mode: it fetches the rows from /api/data,
polls /api/version every second and refetches when a run wrote, and loads one instance's trace
(/api/trace) only when its row is clicked, so a 5,000-instance run opens without reading 5,000
traces; the trace of a running instance is fetched again every second while it is open (traces
are flushed as written). Screenshots come from /api/shot, confined to the trace's `<stem>-shots/`.

Sources: each path given is a run directory (it has output.jsonl or run.json), or a folder whose
subdirectories are runs (`harness view` alone: ./runs). They are resolved again at every poll, so
a run started under a watched folder appears, and a path that does not exist yet is waited for
(the page says so) and shown once a run writes there. /api/version changes when the list of runs
or any run's output.jsonl, report.json, run.json or traces/ folder changes.

Comparing is a choice: /api/data?baseline=PATH compares every other run with that one (`none`:
no comparison; absent: the server's default, the first run when asked for one), and force=1 also
compares runs of another dataset or selection (html.py compare).

Only a request naming the server as it serves is answered: its `Host` header must be `127.0.0.1:PORT` or
`localhost:PORT` (without the port on port 80); any other, or none, is a 421 with nothing read. A page on
another site that rebinds its own name to 127.0.0.1 (DNS rebinding) sends its own name as the Host, so it
cannot read run data through the visitor's browser.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from harness.fsutil import inside
from harness.report import html as pages
from harness.report.live import Watcher
from harness.results.layout import RunDir

SHOT_NAME = re.compile(r"^[\w.-]+\.png$")


def is_run_dir(path: Path) -> bool:
    layout = RunDir(path)
    return layout.output.exists() or layout.run_json.exists()


def resolve(sources: list[Path]) -> list[Path]:
    """The run directories the sources name now: a run directory itself, else a folder's
    subdirectories that are runs (by name); a missing path names none yet."""
    out: list[Path] = []
    for src in sources:
        if is_run_dir(src):
            found = [src]
        else:
            try:
                found = sorted((c for c in src.iterdir() if c.is_dir() and is_run_dir(c)), key=lambda c: c.name)
            except OSError:
                found = []
        out += [d for d in found if d not in out]
    return out


def _stat(path: Path) -> str:
    try:
        st = path.stat()
        return f"{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        return "-"


class Viewer:
    def __init__(self, sources: list[Path], *, compare: bool = True, force: bool = False):
        self.sources = [Path(s) for s in sources]
        self.compare = compare  # by default the first run is the baseline
        self.force = force
        self._lock = threading.Lock()
        # (baseline, force) -> (version, body, each run's rows by id, the run directories)
        self._cache: dict[tuple, tuple[str, bytes, list[dict[str, dict]], list[Path]]] = {}
        self._watchers: dict[Path, Watcher] = {}
        self.dirs: list[Path] = resolve(self.sources)
        title = "harness view: " + ", ".join(s.name or str(s) for s in self.sources)
        self._page = pages.render_page(data=None, mode="live", title=title).encode()

    def version(self) -> str:
        self.dirs = resolve(self.sources)
        parts = []
        for d in self.dirs:
            layout = RunDir(d)
            files = (layout.output, layout.report, layout.run_json, layout.traces)
            parts.append(str(d) + "=" + ",".join(_stat(f) for f in files))
        return "|".join(parts) or "waiting"

    def _current(self, baseline: str | None = "", force: bool | None = None) -> tuple:
        """The runs' data (rows, no traces), rebuilt only when a run wrote. `baseline`: a run's
        path, None for no comparison, "" for the default."""
        force = self.force if force is None else force
        with self._lock:
            v = self.version()
            key = (baseline, force)
            cached = self._cache.get(key)
            if cached is None or cached[0] != v:
                dirs = list(self.dirs)
                paths = [str(d) for d in dirs]
                if baseline == "":
                    index = 0 if self.compare else None
                else:
                    index = paths.index(baseline) if baseline in paths else None
                for d in dirs:
                    self._watchers.setdefault(d, Watcher(d))
                data = pages.build_data(dirs, with_traces=False, baseline=index, force=force, watchers=self._watchers)
                data["watching"] = [str(s) for s in self.sources]
                data["waiting"] = [str(s) for s in self.sources if not s.exists()]
                body = json.dumps(data, separators=(",", ":"), default=str).encode()
                rows = [{str(r["instance_id"]): r for r in run["rows"]} for run in data["runs"]]
                self._cache = {k: c for k, c in self._cache.items() if c[0] == v}
                self._cache[key] = cached = (v, body, rows, dirs)
            return cached

    def data(self, baseline: str | None = "", force: bool | None = None) -> bytes:
        return self._current(baseline, force)[1]

    def _run_dir(self, run: int) -> Path | None:
        dirs = self._current()[3]
        return dirs[run] if 0 <= run < len(dirs) else None

    def trace(self, run: int, iid: str) -> list[dict] | None:
        """The events of the run's row `iid` (a running row's trace as written so far)."""
        _, _, rows, dirs = self._current()
        row = rows[run].get(iid) if 0 <= run < len(rows) else None
        if not row or not row.get("trace"):
            return None
        return pages.page_trace(dirs[run], row["trace"])

    def shot(self, run: int, trace: str, name: str) -> bytes | None:
        if not SHOT_NAME.match(name):
            return None
        root = self._run_dir(run)
        if root is None:
            return None
        path = root / trace
        shot = path.with_name(path.stem + "-shots") / name
        if not inside((root / "traces").resolve(), shot.resolve()) or not shot.is_file():
            return None
        return shot.read_bytes()


def served_hosts(port: int) -> set[str]:
    """The `Host` headers of a request for this server (module docstring)."""
    names = ("127.0.0.1", "localhost")
    return {f"{name}:{port}" for name in names} | (set(names) if port == 80 else set())


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
            port = int(self.connection.getsockname()[1])  # the port this server listens on
            if (self.headers.get("Host") or "").lower() not in served_hosts(port):
                return self._send(421, f"this server answers requests for 127.0.0.1:{port} only".encode(),
                                  "text/plain")
            url = urlparse(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            try:
                if url.path == "/":
                    return self._send(200, viewer._page, "text/html; charset=utf-8")
                if url.path == "/api/version":
                    return self._send(200, viewer.version().encode(), "text/plain")
                if url.path == "/api/data":
                    baseline = q.get("baseline", "")
                    force = {"1": True, "0": False}.get(q.get("force", ""))
                    body = viewer.data(None if baseline == "none" else baseline, force)
                    return self._send(200, body, "application/json")
                run = int(q.get("run", "0"))
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

    def __init__(self, sources: list[Path], port: int = 0, *, compare: bool = True, force: bool = False):
        self.viewer = Viewer(sources, compare=compare, force=force)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self.viewer))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def start(self) -> ViewServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ViewServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
