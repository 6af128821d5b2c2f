"""`fetch_url`: a plain HTTP(S) GET made inside the sandbox, read back like a workspace file.

The request is made by a script in the sandbox (so the sandbox's network policy applies: with
network "none" nothing answers), the body is saved under /workspace/fetched/ and its first page
is returned through the file environment (markitdown in the sandbox, the same pages as
`read_file`, which shows the others). Bounded: at most `max_bytes` (MAX_FETCH_BYTES; a longer body
is refused and nothing is kept) and `timeout` seconds in all (FETCH_TIMEOUT_S). Every failure
(a bad URL, DNS, a refused connection, an HTTP 4xx/5xx, a timeout, a body too big) is a tool
result starting "Error", and the fetch's `env` event (env "fetch", action "fetch_url") has outcome
`error` (or `timeout`); a fetched body that markitdown cannot convert is the file read's error.
The run's leakage guard (websearch/guard.py, the browser's) holds here too: a blocked URL is never
requested, redirects are followed one hop at a time (redirects.py) and a hop onto a blocked URL is never
requested either; both are outcome `blocked` and a `guard` event (source "fetch"). With --web-record or
--web-replay the request goes through the run's web proxy (proxied.py): recorded, or answered from the
archive (a `web_archive` event says which).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from harness.environments.files import FileEnv
from harness.environments.proxied import archive_note
from harness.environments.redirects import NO_FOLLOW, blocked_message, follow
from harness.environments.scripts import outcome_of, script_reply
from harness.sandbox.contract import WORKSPACE
from harness.traces import EnvAction

if TYPE_CHECKING:
    from harness.environments.websearch.guard import Guard

MAX_FETCH_BYTES = 20 * 1024 * 1024
FETCH_TIMEOUT_S = 30.0
FOLDER = "fetched"  # under the workspace

GET = NO_FOLLOW + r"""
import hashlib, http.client, json, mimetypes, os, re, socket, sys, time, urllib.error, urllib.parse, urllib.request
url, folder, limit, budget = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
deadline = time.monotonic() + budget
def out(**kw):
    print(json.dumps(kw)); sys.exit(0)
if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
    out(error=f"only http:// and https:// URLs can be fetched, not {url!r}")
def failed(exc):
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, (TimeoutError, socket.timeout)):
        out(error=f"timeout: {url} did not answer within {budget:g} s", outcome="timeout")
    if isinstance(reason, socket.gaierror):
        out(error=f"cannot resolve the host of {url}: {reason}")
    if isinstance(reason, ConnectionRefusedError):
        out(error=f"connection refused by {url}")
    out(error=f"cannot fetch {url}: {type(reason).__name__}: {reason}")
request = urllib.request.Request(url, headers={"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) harness-fetch",
                                               "Accept": "*/*"})
try:
    resp = urllib.request.urlopen(request, timeout=budget)
except urllib.error.HTTPError as exc:
    out(error=f"HTTP {exc.code} {exc.reason} from {url}", status=exc.code, archive=exc.headers.get("X-Harness-Web"))
except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
    failed(exc)
final = resp.geturl()
ctype = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
declared = resp.headers.get("Content-Length")
if declared and declared.isdigit() and int(declared) > limit:
    out(error=f"too big: {url} is {int(declared)} bytes, more than the {limit} bytes fetch_url takes")
name = os.path.basename(urllib.parse.urlsplit(final).path) or "index"
name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).lstrip(".")[:80] or "index"
if mimetypes.guess_type(name)[0] is None and ctype not in ("", "application/octet-stream"):
    name += mimetypes.guess_extension(ctype) or ""
os.makedirs(folder, exist_ok=True)
path = os.path.join(folder, hashlib.sha256(final.encode()).hexdigest()[:8] + "-" + name)
part = f"{path}.{os.getpid()}.part"  # a fetch of its own: parallel fetches of one URL never share it
size = 0
try:
    with open(part, "wb") as fh:
        while chunk := resp.read(1 << 16):
            size += len(chunk)
            if size > limit:
                raise OverflowError
            if time.monotonic() > deadline:
                raise TimeoutError
            fh.write(chunk)
except OverflowError:
    os.unlink(part)
    out(error=f"too big: {url} sent more than the {limit} bytes fetch_url takes")
except (http.client.HTTPException, OSError) as exc:
    os.unlink(part)
    failed(exc)
os.replace(part, path)
out(path=path, url=final, status=resp.status, content_type=ctype, bytes=size, archive=resp.headers.get("X-Harness-Web"))
"""


class FetchEnv:
    def __init__(self, files: FileEnv, *, max_bytes: int = MAX_FETCH_BYTES, timeout: float = FETCH_TIMEOUT_S,
                 guard: Guard | None = None):
        self.files, self.max_bytes, self.timeout, self.guard = files, max_bytes, timeout, guard

    def fetch(self, url: str) -> str:
        started = time.monotonic()
        data: dict
        if (pattern := self._blocked(url)) is not None:
            data = {"error": blocked_message(url, pattern), "outcome": "blocked"}
        else:
            data = follow(lambda hop: self._get(hop, started), url, self._blocked)
            archive_note(self.files.tracer, data.pop("archive", None), data.get("url", url))
        outcome = outcome_of(data)
        self.files.tracer.emit(EnvAction(env="fetch", action="fetch_url", args={"url": url}, outcome=outcome,
                                         seconds=round(time.monotonic() - started, 4), **data))
        if "error" in data:
            return f"Error: {data['error']}"
        rel = data["path"][len(WORKSPACE) + 1:]
        moved = f" (redirected to {data['url']})" if data["url"] != url else ""
        head = (f"Fetched {url}{moved}: HTTP {data['status']}, {data['content_type'] or 'no content type'}, "
                f"{data['bytes']} bytes, saved as {data['path']}; read_file({rel!r}, page) shows any other page.")
        return head + "\n" + self.files.read(rel)

    def _get(self, url: str, started: float) -> dict:
        """One hop: the script's reply for `url` (a redirect is `{"redirect": ...}`), within what is left of
        the fetch's time."""
        left = max(1.0, self.timeout - (time.monotonic() - started))
        argv = ["python3", "-c", GET, url, f"{WORKSPACE}/{FOLDER}", str(self.max_bytes), str(left)]
        return script_reply(self.files.sandbox.exec(argv, timeout=left + 15), f"fetching {url}", left)

    def _blocked(self, url: str) -> str | None:
        """The guard's pattern that blocks `url` (traced as a `guard` event), or None."""
        pattern = self.guard.blocks(url) if self.guard is not None else None
        if pattern is not None:
            self.files.tracer.emit(EnvAction(env="guard", action="block", outcome="blocked",
                                             args={"url": url, "pattern": pattern, "source": "fetch"}))
        return pattern
