"""The per-instance model proxy: an HTTP server on the host's loopback, in the agent's process.

It speaks `POST .../chat/completions` (OpenAI), `POST .../messages` (Anthropic) and `GET .../models`
(wire.py), and answers every call through the instance's ChatModel (models/chat.py), so the call is
the harness's own: the real key stays in this process, the instance's Meter counts tokens and cost
and enforces --max-steps, --max-tokens and the budgets, each call is a `model_call` trace event, a
replay model replays, a `--record` run records. A request must carry the instance's token
(`Authorization: Bearer TOKEN` or `x-api-key: TOKEN`): a fresh random value per instance, worthless
for any other instance and for the provider.

A reply's tool calls are traced as `tool_call` events (source `sandbox`), so they are the row's
`tool_calls` as for the built-in agents: what the model asked the program to run; they wait in `asked`
for the program to run them through the harness's tools (tools.py, whose `tool_result` answers the
call's id). A call the program runs on its own is its own business (no `tool_result` is traced).

A budget reached or a failed model call ends the instance: the proxy keeps the error (`stopped`),
answers the agent 400 with `x-should-retry: false` (clients do not retry it), and the runner stops
the agent and raises the error (a limit row, a model error). The handler threads hand each request
to the agent's event loop, where the Meter lives. `cancel()` ends the requests in flight (the program
that sent them has ended: relay.py `relayed`): their model calls are cancelled, so their connections
close, and each is answered 503.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.agents.sandboxed import wire
from harness.errors import HarnessError
from harness.models.chat import ChatModel, Reply
from harness.traces import ToolCall

SOURCE = "sandbox"  # the source of the agent program's trace events
JSON = {"Content-Type": "application/json"}
NO_RETRY = {**JSON, "x-should-retry": "false"}


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON))


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> Answer:
    body = json.dumps({"type": "error", "error": {"message": message, "type": kind}}).encode()
    return Answer(status, body, dict(headers or JSON))


class ModelProxy:
    """Serves one instance's agent; `url` once started (`start` inside the agent's event loop)."""

    def __init__(self, chat: ChatModel, token: str, model: str):
        self.chat, self.token, self.model = chat, token, model
        self.stopped: HarnessError | None = None  # the limit or model failure that ends the instance
        self.calls = 0
        self.asked: list[ToolCall] = []  # the replies' tool calls not yet run through the harness's tools
        self._server: ThreadingHTTPServer | None = None
        self._pending: set[Future[Answer]] = set()  # the requests being answered

    @property
    def url(self) -> str:
        assert self._server is not None, "the proxy is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, loop))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="model-proxy", daemon=True).start()

    def cancel(self) -> None:
        """Cancel the requests being answered (their model calls with them)."""
        for future in list(self._pending):
            future.cancel()

    def answered(self, future: Future[Answer]) -> Answer:
        """A request's answer once `future` (proxy.answer in the agent's loop) has it; 503 if cancelled."""
        self._pending.add(future)
        try:
            return future.result()
        except CancelledError:
            return _error(503, "the agent program ended: its request was cancelled", "cancelled", NO_RETRY)
        finally:
            self._pending.discard(future)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    async def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        """The answer to one HTTP request of the agent (headers: lower-case names)."""
        if not authorized(headers, self.token):
            return _error(401, "this proxy takes the instance's token only", "authentication_error")
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and route.endswith("/models"):
            return Answer(200, json.dumps({"object": "list", "data": [
                {"id": self.model, "object": "model", "created": 0, "owned_by": "harness"}]}).encode())
        if method != "POST" or not route.endswith(("/chat/completions", "/messages")):
            return _error(404, f"no route {method} {route} (chat/completions, messages, models)", "not_found_error")
        if self.stopped is not None:
            return _error(400, f"the instance has ended: {self.stopped}", "harness_stopped", NO_RETRY)
        anthropic = route.endswith("/messages")
        try:
            request = json.loads(body or b"null")
            messages, tools = (wire.messages_request if anthropic else wire.chat_request)(request)
        except (ValueError, KeyError, TypeError) as exc:  # not JSON, or not of the format: the agent's mistake
            return _error(400, f"bad request: {exc}", "invalid_request_error", NO_RETRY)
        self.calls += 1
        try:
            reply = await self.chat.complete(messages, tools)
        except HarnessError as exc:  # a budget, or the model's failure (already traced by the Meter)
            self.stopped = exc
            return _error(400, f"{type(exc).__name__}: {exc}", "harness_stopped", NO_RETRY)
        self._trace_calls(reply)
        if request.get("stream"):
            stream = wire.message_stream if anthropic else wire.chat_stream
            return Answer(200, stream(reply, self.model), {"Content-Type": "text/event-stream"})
        whole = wire.message_reply if anthropic else wire.chat_completion
        return Answer(200, json.dumps(whole(reply, self.model)).encode())

    def _trace_calls(self, reply: Reply) -> None:
        tracer = self.chat.meter.tracer
        for call in reply.tool_calls:
            event = ToolCall(source=SOURCE, name=call["name"], arguments=call["arguments"], call_id=call["id"])
            self.asked.append(event)
            if tracer is not None:
                tracer.emit(event)


def authorized(headers: dict[str, str], token: str) -> bool:
    """Whether a request (headers: lower-case names) carries the instance's token."""
    given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
    return hmac.compare_digest(given.encode(), token.encode())


def _handler(proxy: ModelProxy, loop: asyncio.AbstractEventLoop) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the trace says what matters
            pass

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            answer = proxy.answered(asyncio.run_coroutine_threadsafe(
                proxy.answer(self.command, self.path, headers, body), loop))
            self.send_response(answer.status)
            for key, value in answer.headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        do_GET = do_POST = _serve

    return Handler
