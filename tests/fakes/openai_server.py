"""A small scripted OpenAI-compatible server for tests (stdlib only).

    script = [
        error(500, {"error": {"message": "boom"}}),
        error(429, headers={"retry-after": "0", "retry-after-ms": "10"}),
        tool_calls(("run_python", {"code": "print(1)"}), usage=(100, 20)),
        text("done <solution>1</solution>", usage=(150, 10)),
    ]
    with FakeOpenAI(script) as server:
        server.base_url   # http://127.0.0.1:PORT/v1
        server.requests   # every request: method, path, headers (lower-case names), json
        server.responses  # (status, body) of every chat completion answer, in order

Each `POST /v1/chat/completions` (non-streaming) takes the next item of the script:

- ``("error", status, body_dict, headers)``: that status, JSON body and extra headers;
- ``("tool_calls", [(name, arguments), ...], (prompt_tokens, completion_tokens))``: an
  assistant message with OpenAI-format tool calls, finish_reason "tool_calls" (a usage of four,
  ``(prompt, completion, cached, reasoning)``, adds OpenAI's ``prompt_tokens_details.cached_tokens``
  and ``completion_tokens_details.reasoning_tokens``, for text too);
- ``("text", content, (prompt_tokens, completion_tokens), finish)``: assistant text, finish_reason `finish`
  ("stop"; "length": a reply cut at the server's token cap, as llama.cpp's default 512 cuts a looping model);
- ``("hang", seconds)``: no answer for that long (None: until the server stops), then the
  connection is closed without a response: a model that hangs;
- ``("hold", seconds)``: the same, watching the connection: ``server.holds`` has one entry per such
  request, ``{"at": time.time() on arrival, "gone": time.time() when the client closed its end, or
  None}`` (a server that cancels a request on disconnect, as llama.cpp's does, frees its slot then);
- ``("raw", status, body, content_type)``: exactly these bytes (a reply that is not JSON, or JSON
  that is not a chat completion, e.g. empty ``choices``);
- ``("endless", chunk, every, most, seconds)``: 200 and its headers (JSON, no length, gzip-encoded
  when `gzip`), then the start of a chat completion whose content never ends: `chunk` bytes every
  `every` seconds until the client hangs up, or the test's own bounds (`most` bytes or `seconds`)
  are reached, or the server stops. ``server.endless`` has one entry per such answer: bytes sent,
  and whether the client hung up.

The harness's preflight call (header ``X-Harness-Preflight``, harness/models/probe.py) does not
take script items: it gets ``probe`` (default: text "OK"), after ``probe_delay`` seconds (a slow
CPU model's first call), and is kept in ``server.probes``, out of ``chat_requests`` and ``responses``.

When the script is used up, `default` is served (e.g. an error for "always fails");
without a default the server answers 400 with ``x-should-retry: false`` so a test
that under-scripted fails fast and visibly (``server.exhausted`` counts those).
`GET /v1/models` lists one model. Every completion carries ``usage``.

Load, for tests of the harness's cap on calls in flight and of 429 handling:

- ``delay=S``: every chat completion request (probes aside) is held S seconds before it is
  answered; ``server.max_in_flight`` is the most such requests the server was handling at once
  (``server.in_flight`` now);
- ``rate_limited=K, retry_after="1"``: the first K chat completion requests are answered 429
  with that ``Retry-After`` header (seconds or an HTTP date), without taking script items.

Servers that refuse, as real ones do (probes included, before any script item is taken):

- ``refuse_tools=True``: a request carrying ``tools`` is answered 400 with vLLM's words for a
  server started without ``--enable-auto-tool-choice`` (``REFUSE_TOOLS``);
- ``strict_model=True``: a request naming another model than ``model`` is answered 404, as vLLM
  and OpenAI answer an unknown model id.

``fingerprint="fp_1"`` answers with that ``system_fingerprint`` (default none), ``answers_as="gpt-x-0613"``
names that model id in every reply whatever the request asked for (an alias the provider re-pointed).

Each recorded request has ``at`` (time.monotonic() on arrival), and ``status`` once answered.

Other wire formats subclass it (tests/fakes/providers.py): ``route`` is the chat path served (query
string aside), ``base_path`` what ``base_url`` ends with, ``gate(path, headers)`` an error to answer
before anything else (a missing key or api-version), ``respond_chat`` the answer's shape.

Speech to text: ``POST /v1/audio/transcriptions`` (multipart/form-data, as the real API) answers
``{"text": transcript}`` (default "fake transcript"), or, when ``transcript`` is an ``error(...)``
item, that error. Each is kept in ``server.transcriptions``: the form's fields (``model``, ...)
and ``file`` (the uploaded bytes) and ``filename``; its request is in ``requests`` too (json None).
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Item = tuple

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


def error(status: int, body: dict | None = None, headers: dict | None = None) -> Item:
    body = body if body is not None else {"error": {"message": f"scripted error {status}", "type": "server_error",
                                                    "param": None, "code": None}}
    return ("error", status, body, dict(headers or {}))


def tool_calls(*calls: tuple[str, dict | str], usage: tuple[int, ...] = (10, 5)) -> Item:
    return ("tool_calls", list(calls), usage)


def text(content: str, usage: tuple[int, ...] = (10, 5), finish: str = "stop") -> Item:
    return ("text", content, usage, finish)


def hang(seconds: float | None = None) -> Item:
    return ("hang", seconds)


def hold(seconds: float | None = None) -> Item:
    return ("hold", seconds)


def raw(body: str | bytes, status: int = 200, content_type: str = "application/json") -> Item:
    return ("raw", status, body.encode() if isinstance(body, str) else body, content_type)


def endless(chunk: int = 1 << 16, every: float = 0.0, most: int = 1 << 30, seconds: float = 120.0,
            gzip: bool = False) -> Item:
    return ("endless", chunk, every, most, seconds, gzip)


PROBE_HEADER = "x-harness-preflight"
REFUSE_TOOLS = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
KINDS = ("error", "tool_calls", "text", "hang", "raw", "endless", "hold")


def _usage(usage: tuple[int, ...]) -> dict:
    """(prompt, completion), or (prompt, completion, cached, reasoning): OpenAI's usage with its details."""
    prompt, completion = usage[:2]
    out: dict = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if len(usage) == 4:
        out["prompt_tokens_details"] = {"cached_tokens": usage[2], "audio_tokens": 0}
        out["completion_tokens_details"] = {"reasoning_tokens": usage[3], "audio_tokens": 0,
                                            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    return out


class FakeOpenAI:
    route = "/v1/chat/completions"
    base_path = "/v1"

    def __init__(self, script: Sequence[Item], *, default: Item | None = None, model: str = "fake-model-1",
                 probe: Item | None = None, probe_delay: float = 0.0, delay: float = 0.0, rate_limited: int = 0,
                 retry_after: str = "1",
                 refuse_tools: bool = False, strict_model: bool = False,
                 transcript: str | Item = "fake transcript", fingerprint: str | None = None,
                 answers_as: str | None = None):
        probe = probe or text("OK")
        # what makes calls comparable: the reply's system_fingerprint, and the model id it names (None: the one
        # asked for; another: an alias the provider re-pointed)
        self.fingerprint, self.answers_as = fingerprint, answers_as
        for item in list(script) + ([default] if default else []) + [probe]:
            if not (isinstance(item, tuple) and item and item[0] in KINDS):
                raise ValueError(f"not a script item: {item!r}")
        self.script = list(script)
        self.default = default
        self.probe, self.probe_delay = probe, probe_delay
        self.probes: list[dict[str, Any]] = []  # the harness's preflight calls
        self._stopping = threading.Event()
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.responses: list[tuple[int, Any]] = []  # (status, JSON body) of every chat completion answer
        self.exhausted = 0
        self.endless: list[dict[str, Any]] = []  # per endless answer: {"sent": bytes, "hung_up": bool}
        self.holds: list[dict[str, Any]] = []  # per hold: {"at": arrival, "gone": the client's close, or None}
        self.delay, self.rate_limited, self.retry_after = delay, rate_limited, retry_after
        self.refuse_tools, self.strict_model = refuse_tools, strict_model
        self.transcript = transcript
        self.transcriptions: list[dict[str, Any]] = []  # per speech-to-text request: its form fields and file
        self.in_flight = self.max_in_flight = 0
        self._throttled = 0  # 429s answered so far for `rate_limited`
        self._next = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The agents' (and judges') chat completion requests; preflight probes are in `probes`."""
        return [r for r in self.requests if r["path"].split("?")[0].rstrip("/") == self.route
                and PROBE_HEADER not in r["headers"]]

    @property
    def served(self) -> int:
        """Script items consumed so far."""
        return self._next

    def start(self) -> FakeOpenAI:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # hanging answers end now
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- responses ----------------------------------------------------------------------------

    def _take(self) -> Item | None:
        with self._lock:
            if self._next < len(self.script):
                item = self.script[self._next]
                self._next += 1
                return item
            if self.default is None:
                self.exhausted += 1
            return self.default

    def respond_chat(self, body: Any, item: Item | None = None) -> tuple[int, Any, dict]:
        """(status, payload, headers); payload is a dict (JSON), raw bytes, or None (hang up)."""
        item = item or self._take()
        if item is None:
            return 400, {"error": {"message": "fake server: script exhausted", "type": "invalid_request_error",
                                   "param": None, "code": "script_exhausted"}}, {"x-should-retry": "false"}
        kind = item[0]
        if kind == "hang":
            self._stopping.wait(item[1])
            return 0, None, {}
        if kind == "raw":
            _, status, body_bytes, content_type = item
            return status, body_bytes, {"Content-Type": content_type}
        if kind == "endless":
            return 200, item, {}  # streamed by the handler
        if kind == "hold":
            return 0, item, {}  # watched by the handler
        if kind == "error":
            _, status, payload, headers = item
            return status, payload, headers
        model = body.get("model", self.model) if isinstance(body, dict) else self.model
        model = self.answers_as or model
        if kind == "tool_calls":
            _, calls, usage = item
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{next(self._ids):04d}", "type": "function",
                 "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                for name, args in calls]}
            finish = "tool_calls"
        else:
            _, content, usage, *said = item
            message = {"role": "assistant", "content": content}
            finish = said[0] if said else "stop"
        return 200, {
            "id": f"chatcmpl-fake-{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "system_fingerprint": self.fingerprint,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": _usage(usage),
        }, {}

    def gate(self, path: str, headers: dict[str, str]) -> Item | None:
        """An error to answer this request with before anything else (None: none); headers lower-case."""
        return None

    def refusal(self, body: Any) -> Item | None:
        """The error a refusing server answers this request with (vLLM's body: no "error" wrapper), or None."""
        body = body if isinstance(body, dict) else {}
        if self.strict_model and body.get("model") != self.model:
            return error(404, {"object": "error", "message": f"The model `{body.get('model')}` does not exist.",
                               "type": "NotFoundError", "param": None, "code": 404})
        if self.refuse_tools and body.get("tools"):
            return error(400, {"object": "error", "message": REFUSE_TOOLS, "type": "BadRequestError",
                               "param": None, "code": 400})
        return None

    def record(self, method: str, path: str, headers, body: Any) -> dict[str, Any]:
        entry = {"method": method, "path": path, "headers": {k.lower(): v for k, v in headers.items()},
                 "json": body, "at": time.monotonic()}
        with self._lock:
            self.requests.append(entry)
        return entry

    def arrive(self) -> Item | None:
        """A chat completion request is being handled: count it in flight, hold it `delay` seconds;
        returns the 429 to answer instead of a script item while `rate_limited` lasts."""
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            throttle = self._throttled < self.rate_limited
            if throttle:
                self._throttled += 1
        if self.delay:
            self._stopping.wait(self.delay)
        if throttle:
            return error(429, {"error": {"message": "fake server: rate limit reached", "type": "rate_limit_error",
                                         "param": None, "code": "rate_limit_exceeded"}},
                         {"retry-after": self.retry_after})
        return None

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive; every response has a Content-Length
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet in tests
            pass

        def _read_body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _send(self, status: int, payload: Any, headers: dict | None = None) -> None:
            headers = dict(headers or {})
            body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            content_type = headers.pop("Content-Type", "application/json")
            lines = [f"{self.protocol_version} {status} {_REASONS.get(status, 'Status')}",
                     f"Content-Type: {content_type}", f"Content-Length: {len(body)}",
                     f"Date: {self.date_time_string()}", "Server: fake-openai"]
            lines += [f"{k}: {v}" for k, v in headers.items()]
            if self.close_connection:
                lines.append("Connection: close")
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
            self.wfile.write(head + body)  # one write: headers and body together
            self.wfile.flush()

        def do_POST(self) -> None:  # noqa: N802
            raw = self._read_body()
            if self.path.split("?")[0].rstrip("/") == "/v1/audio/transcriptions":
                self._transcribe(raw)
                return
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = {"_raw": raw.decode(errors="replace")}
            entry = fake.record("POST", self.path, self.headers, body)
            if self.path.split("?")[0].rstrip("/") != fake.route:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            if (refused := fake.gate(self.path, entry["headers"])) is not None:
                self._answer(refused, body, entry, probing=True)  # kept out of the answers
                return
            if isinstance(body, dict) and body.get("stream"):
                self._send(400, {"error": {"message": "fake server: streaming not supported",
                                           "type": "invalid_request_error"}}, {"x-should-retry": "false"})
                return
            probing = PROBE_HEADER in {k.lower() for k in self.headers.keys()}
            if probing:
                with fake._lock:
                    fake.probes.append({"path": self.path, "json": body})
                if fake.probe_delay:
                    fake._stopping.wait(fake.probe_delay)
                self._answer(fake.refusal(body) or fake.probe, body, entry, probing=True)
                return
            try:
                self._answer(fake.arrive() or fake.refusal(body), body, entry, probing=False)
            finally:
                fake.leave()

        def _transcribe(self, raw: bytes) -> None:
            """Speech to text: the multipart form parsed as the real API reads it, kept, answered."""
            entry = fake.record("POST", self.path, self.headers, None)
            head = f"Content-Type: {self.headers.get('Content-Type', '')}\r\n\r\n".encode("latin-1")
            form = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
            fields: dict[str, Any] = {}
            for part in form.iter_parts() if form.is_multipart() else []:
                name = part.get_param("name", header="content-disposition")
                if part.get_filename() is not None:
                    fields["file"], fields["filename"] = part.get_payload(decode=True), part.get_filename()
                else:
                    fields[name] = part.get_payload(decode=True).decode()
            with fake._lock:
                fake.transcriptions.append(fields)
            if "file" not in fields or "model" not in fields:
                message = "fake server: a transcription needs a file and a model"
                status, payload, headers = 400, {"error": {"message": message, "type": "invalid_request_error"}}, {}
            elif isinstance(fake.transcript, tuple):
                _, status, payload, headers = fake.transcript
            else:
                status, payload, headers = 200, {"text": fake.transcript}, {}
            entry["status"] = status
            self._send(status, payload, headers)

        def _answer(self, item: Item | None, body: Any, entry: dict, *, probing: bool) -> None:
            status, payload, headers = fake.respond_chat(body, item)
            if payload is None:  # a hang: close without an answer
                self.close_connection = True
                return
            if isinstance(payload, tuple) and payload[0] == "hold":
                self.close_connection = True
                self._watch(payload[1])
                return
            if isinstance(payload, tuple):
                entry["status"] = status
                self._stream_forever(payload)
                return
            entry["status"] = status
            if not probing:
                with fake._lock:
                    fake.responses.append((status, payload))
            self._send(status, payload, headers)

        def _watch(self, seconds: float | None) -> None:
            """No answer for `seconds` (None: until the server stops); note when the client closes its end."""
            import select
            import socket

            record: dict[str, Any] = {"at": time.time(), "gone": None}
            with fake._lock:
                fake.holds.append(record)
            ends = None if seconds is None else time.monotonic() + seconds
            while not fake._stopping.is_set() and (ends is None or time.monotonic() < ends):
                if select.select([self.connection], [], [], 0.05)[0]:
                    try:
                        gone = self.connection.recv(1, socket.MSG_PEEK) == b""
                    except OSError:
                        gone = True
                    if gone:
                        record["gone"] = time.time()
                        return
                    self.connection.recv(65536)  # a client's stray bytes: not an end

        def _stream_forever(self, item: Item) -> None:
            """A 200 whose body has no end (within the item's bounds); the connection closes after it."""
            import zlib

            _, chunk, every, most, seconds, gzip = item
            self.close_connection = True
            pack = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS) if gzip else None
            head = [f"{self.protocol_version} 200 OK", "Content-Type: application/json", "Connection: close",
                    f"Date: {self.date_time_string()}", "Server: fake-openai"] + (
                ["Content-Encoding: gzip"] if gzip else [])
            record = {"sent": 0, "hung_up": False}
            with fake._lock:
                fake.endless.append(record)
            start = b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": ' \
                    b'{"role": "assistant", "content": "'
            data = start + b"a" * max(chunk - len(start), 0)
            ends = time.monotonic() + seconds
            try:
                self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
                while record["sent"] < most and time.monotonic() < ends and not fake._stopping.is_set():
                    out = pack.compress(data) + pack.flush(zlib.Z_SYNC_FLUSH) if pack else data
                    self.wfile.write(out)
                    self.wfile.flush()
                    record["sent"] += len(out)
                    data = b"a" * chunk
                    if every:
                        fake._stopping.wait(every)
            except OSError:  # BrokenPipe / ConnectionReset: the client stopped reading
                record["hung_up"] = True

        def do_GET(self) -> None:  # noqa: N802
            fake.record("GET", self.path, self.headers, None)
            if self.path.split("?")[0].rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [
                    {"id": fake.model, "object": "model", "created": 0, "owned_by": "fake"}]})
                return
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    return Handler
