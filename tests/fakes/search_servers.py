"""Fake Tavily, Serper, Brave and SearXNG servers for tests (stdlib only), speaking each real wire format.

    with FakeSearch("tavily", key="tvly-test") as server:
        server.base_url    # http://127.0.0.1:PORT
        server.requests    # every request: method, path, query (dict), headers (lower-case), json

Each checks what the real API checks: the method and path (`PATHS`), and the key where the real API
reads it (tavily: `Authorization: Bearer KEY`; serper: `X-API-KEY`; brave: `X-Subscription-Token`;
searxng: none, but `format=json`). A wrong key is answered as the real API answers it (tavily 401
{"detail": {"error": ...}}, serper 403 {"message": "Unauthorized.", "statusCode": 403}, brave 422
{"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID", ...}}). A right one gets
`results` (title, url, snippet, date) in the provider's own response layout (`body`).

`script`: answers taken in order before the results, each ("status", CODE, headers) for a bare error
(e.g. 503, 429 with Retry-After), ("query", ) for the provider's refusal of the query (tavily 400,
serper 400, brave 422 VALIDATION, searxng 400), ("text", CONTENT_TYPE, BYTES) for a 200 that is not
the provider's JSON (a proxy's login page), or ("trickle", ) for a 200 whose body comes a byte every
0.2 s without end (each read well within any timeout) until the client leaves or the server closes.
`delay`: seconds each answer is held.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATHS = {"tavily": ("POST", "/search"), "serper": ("POST", "/search"), "brave": ("GET", "/res/v1/web/search"),
         "searxng": ("GET", "/search")}
RESULTS = [
    {"title": "Teak Bench - Northwind", "url": "http://shop.gaia.test/product/FUR-101",
     "snippet": "A teak bench, 3 years warranty.", "date": "2023-05-01"},
    {"title": "GAIA validation set", "url": "https://huggingface.co/datasets/gaia-benchmark/GAIA/tree/main",
     "snippet": "the benchmark's answers", "date": None},
    {"title": "Bench care", "url": "https://example.org/bench-care", "snippet": "Oil it twice a year.", "date": None},
]


def body(provider: str, query: str, results: list[dict]) -> dict:
    """A successful answer in the provider's documented layout."""
    if provider == "tavily":
        return {"query": query, "answer": None, "images": [], "response_time": 0.42, "results": [
            {"title": r["title"], "url": r["url"], "content": r["snippet"], "score": 0.9 - i / 10, "raw_content": None,
             **({"published_date": r["date"]} if r["date"] else {})} for i, r in enumerate(results)]}
    if provider == "serper":
        return {"searchParameters": {"q": query, "type": "search", "engine": "google"}, "organic": [
            {"title": r["title"], "link": r["url"], "snippet": r["snippet"], "position": i + 1,
             **({"date": r["date"]} if r["date"] else {})} for i, r in enumerate(results)], "credits": 1}
    if provider == "brave":
        return {"type": "search", "query": {"original": query}, "web": {"type": "search", "results": [
            {"title": r["title"], "url": r["url"], "description": r["snippet"], "type": "search_result",
             **({"page_age": r["date"]} if r["date"] else {})} for r in results]}}
    return {"query": query, "number_of_results": len(results), "results": [
        {"title": r["title"], "url": r["url"], "content": r["snippet"], "engine": "duckduckgo",
         **({"publishedDate": r["date"]} if r["date"] else {})} for r in results]}


def refusal(provider: str, kind: str) -> tuple[int, dict]:
    """(status, body) of a refused key ("key") or query ("query"), as each API answers."""
    if kind == "key":
        return {"tavily": (401, {"detail": {"error": "Unauthorized: missing or invalid API key."}}),
                "serper": (403, {"message": "Unauthorized.", "statusCode": 403}),
                "brave": (422, {"type": "ErrorResponse", "error": {
                    "id": "x", "status": 422, "code": "SUBSCRIPTION_TOKEN_INVALID",
                    "detail": "The provided subscription token is invalid.", "meta": {}}}),
                "searxng": (403, {"error": "forbidden"})}[provider]
    return {"tavily": (400, {"detail": {"error": "Query is invalid."}}),
            "serper": (400, {"message": "Query is required.", "statusCode": 400}),
            "brave": (422, {"type": "ErrorResponse", "error": {
                "id": "y", "status": 422, "code": "VALIDATION", "detail": "Unable to validate request parameter(s)",
                "meta": {}}}),
            "searxng": (400, {"error": "bad query"})}[provider]


class FakeSearch:
    def __init__(self, provider: str, *, key: str | None = "test-key", results: list[dict] | None = None,
                 script: list[tuple] | None = None, delay: float = 0.0):
        self.provider, self.key, self.delay = provider, key, delay
        self.results = RESULTS if results is None else results
        self.script = list(script or [])
        self.requests: list[dict[str, Any]] = []
        self._lock, self.closed = threading.Lock(), threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeSearch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closed.set()
        self._server.shutdown()
        self._server.server_close()

    def key_given(self, headers: dict[str, str]) -> str | None:
        if self.provider == "tavily":
            return headers.get("authorization", "").removeprefix("Bearer ") or None
        return headers.get({"serper": "x-api-key", "brave": "x-subscription-token"}.get(self.provider, ""))

    def answer(self, method: str, path: str, query: dict, headers: dict, payload: Any) -> tuple[int, Any, dict]:
        """(status, body, headers): a body that is a dict is sent as JSON, bytes as they are, None trickles."""
        with self._lock:
            self.requests.append({"method": method, "path": path, "query": query, "headers": headers, "json": payload})
            item = self.script.pop(0) if self.script else None
        if self.delay:
            time.sleep(self.delay)
        if (method, path) != PATHS[self.provider]:
            return 404, {"error": f"no route {method} {path}"}, {}
        if self.provider != "searxng" and self.key_given(headers) != self.key:
            return (*refusal(self.provider, "key"), {})
        if self.provider == "searxng" and query.get("format") != "json":
            return 403, {"error": "format not allowed"}, {}
        if item is not None and item[0] == "status":
            return item[1], {"error": f"status {item[1]}"}, item[2] if len(item) > 2 else {}
        if item is not None and item[0] == "query":
            return (*refusal(self.provider, "query"), {})
        if item is not None and item[0] == "text":
            return 200, item[2], {"Content-Type": item[1]}
        if item is not None and item[0] == "trickle":
            return 200, None, {}
        text = (payload or {}).get("query") or (payload or {}).get("q") or query.get("q", "")
        n = int((payload or {}).get("max_results") or (payload or {}).get("num") or query.get("count") or 10)
        return 200, body(self.provider, text, self.results[:n]), {}


def _handler(fake: FakeSearch) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go in two writes: no delayed-ACK stall between them

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet in tests
            pass

        def _serve(self, method: str) -> None:
            url = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            payload = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, answer, extra = fake.answer(method, url.path, dict(urllib.parse.parse_qsl(url.query)), headers,
                                                payload)
            data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", extra.pop("Content-Type", "application/json"))
            self.send_header("Content-Length", str(10_000_000 if answer is None else len(data)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            if answer is not None:
                self.wfile.write(data)
                return
            while not fake.closed.is_set():  # ("trickle", ): a byte every 0.2 s
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return
                fake.closed.wait(0.2)

        def do_GET(self) -> None:  # noqa: N802
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

    return Handler
