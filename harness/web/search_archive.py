"""Search provider exchanges in the run's web archive (issue 22): recorded by `--web-record`, served by
`--web-replay`, through `SearchHTTP.send` (environments/websearch/env.py), the one client every provider
request goes through.

Record: each exchange is appended to `RUN_DIR/web/search.warc.gz` (one file per run, shared by the run's
agent processes: each exchange is written as one block under an exclusive `flock`) as a WARC request and
response record, tagged like the browser proxy's (images/webproxy/warc_addon.py): WARC-Harness-Instance
(INSTANCE/ATTEMPT), WARC-Harness-Key (rules.request_key), WARC-Harness-Timing (start, end: epoch seconds)
and WARC-Harness-Source: search. The key never reaches the file: a header carrying a credential
(SECRET_HEADERS) keeps its name with the value REDACTED, and the key's value is replaced by REDACTED
wherever else it appears (URL, other headers, body) before the replay key is computed, so a replay with
another key, or none, matches.

Replay: `SearchReplay(archives)` indexes the search response records of the given archives (the browser
proxy's records in the same folder are skipped) by WARC-Harness-Key; `answer(request)` gives the n-th
recording of the n-th identical request of this process (the last one repeated after), as an
httpx.Response, or raises `NotRecorded`. Nothing here opens a connection in replay.
"""

from __future__ import annotations

import fcntl
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from harness.web.rules import request_key

if TYPE_CHECKING:  # imported where used: a run that records and replays nothing imports neither
    import httpx

SEARCH_ARCHIVE = "search.warc.gz"
REDACTED = "REDACTED"
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "x-subscription-token", "cookie",
                            "api-key"})
HOP = frozenset({"transfer-encoding", "connection", "keep-alive", "content-length", "content-encoding"})


class NotRecorded(Exception):
    """A replayed run asked the provider something its recording never did (`method`, `url`: redacted)."""

    def __init__(self, method: str, url: str):
        super().__init__(f"{method} {url}")
        self.method, self.url = method, url


def _clean(text: str, secret: str | None) -> str:
    return text.replace(secret, REDACTED) if secret else text


def redacted(request: httpx.Request, secret: str | None) -> tuple[str, list[tuple[str, str]], bytes]:
    """The request as archived and matched: (URL, headers, body), no credential left in any of them."""
    headers = [(name, REDACTED if name.lower() in SECRET_HEADERS else _clean(value, secret))
               for name, value in request.headers.multi_items()]
    body = request.content
    if secret:
        body = body.replace(secret.encode(), REDACTED.encode())
    return _clean(str(request.url), secret), headers, body


def search_key(request: httpx.Request, secret: str | None) -> str:
    url, _, body = redacted(request, secret)
    return request_key(request.method, url, body)


class SearchRecorder:
    """Appends this process's provider exchanges to the run's search archive."""

    def __init__(self, path: Path, who: str, secret: str | None):
        self.path, self.who, self.secret = path, who, secret

    def record(self, request: httpx.Request, response: httpx.Response, start: float, end: float) -> None:
        import httpx
        from warcio.statusandheaders import StatusAndHeaders
        from warcio.warcwriter import WARCWriter

        url, headers, body = redacted(request, self.secret)
        buf = io.BytesIO()
        writer = WARCWriter(buf, gzip=True)
        payload = response.content
        answer = writer.create_warc_record(
            url, "response", payload=io.BytesIO(payload),
            warc_headers_dict={"WARC-Harness-Key": request_key(request.method, url, body),
                               "WARC-Harness-Instance": self.who, "WARC-Harness-Source": "search",
                               "WARC-Harness-Timing": json.dumps({"start": start, "end": end})},
            http_headers=StatusAndHeaders(
                f"{response.status_code} {response.reason_phrase}",
                [(k, _clean(v, self.secret)) for k, v in response.headers.multi_items() if k.lower() not in HOP]
                + [("Content-Length", str(len(payload)))], protocol="HTTP/1.1"))
        target = httpx.URL(url)
        asked = writer.create_warc_record(
            url, "request", payload=io.BytesIO(body),
            warc_headers_dict={"WARC-Concurrent-To": answer.rec_headers.get_header("WARC-Record-ID"),
                               "WARC-Harness-Instance": self.who, "WARC-Harness-Source": "search"},
            http_headers=StatusAndHeaders(f"{request.method} {target.raw_path.decode()} HTTP/1.1", headers,
                                          protocol=""))
        writer.write_record(asked)
        writer.write_record(answer)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # the run's agent processes append to the one file
            fh.write(buf.getvalue())
            fh.flush()


class SearchReplay:
    """The recorded answers of the given archives, served in order per identical request."""

    def __init__(self, archives: list[Path], secret: str | None = None):
        from warcio.archiveiterator import ArchiveIterator

        self.secret = secret
        self.recorded: dict[str, list[tuple[int, list[tuple[str, str]], bytes]]] = defaultdict(list)
        self.served: dict[str, int] = defaultdict(int)
        for path in archives:
            with path.open("rb") as fh:
                for record in ArchiveIterator(fh):
                    name = record.rec_headers.get_header("WARC-Harness-Key")
                    source = record.rec_headers.get_header("WARC-Harness-Source")
                    if record.rec_type == "response" and name and source == "search" and record.http_headers:
                        head = record.http_headers
                        self.recorded[name].append((int(head.get_statuscode()), list(head.headers),
                                                    record.content_stream().read()))

    def answer(self, request: httpx.Request) -> httpx.Response:
        import httpx

        name = search_key(request, self.secret)
        found = self.recorded.get(name)
        if not found:
            raise NotRecorded(request.method, redacted(request, self.secret)[0])
        status, headers, body = found[min(self.served[name], len(found) - 1)]
        self.served[name] += 1
        kept = [(k, v) for k, v in headers if k.lower() not in HOP]
        return httpx.Response(status, headers=kept, content=body, request=request)
