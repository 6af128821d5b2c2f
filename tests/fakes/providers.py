"""Scripted servers for the other providers' wire formats (stdlib only), on FakeOpenAI's machinery.

The same script items as tests/fakes/openai_server.py (``text``, ``tool_calls``, ``error``, ``hang``,
``raw``), the same ``requests``/``responses``/``probes``/``chat_requests``:

- ``FakeAnthropic``: the Messages API, ``POST /v1/messages`` (``base_url`` is the server's root, as
  the anthropic SDK takes it). A ``text`` or ``tool_calls`` item is answered as a ``message`` with
  ``text`` / ``tool_use`` content blocks (stop_reason ``end_turn`` / ``tool_use``) and Anthropic's
  usage (``input_tokens``, ``output_tokens``, and ``cache_read_input_tokens`` = ``cache_read`` on
  every answer). ``anthropic_error(status, type, message, headers)`` is an error in Anthropic's
  shape: 429 ``rate_limit_error`` (with ``retry-after``), 529 ``overloaded_error``, 401
  ``authentication_error``. A request without the key ``key`` (as ``x-api-key``, or as a bearer token,
which the anthropic SDK 2.x sends) or
  without ``anthropic-version`` is answered 401 / 400 before any script item.
- ``FakeAzure``: Azure OpenAI's deployment URLs,
  ``POST /openai/deployments/{deployment}/chat/completions?api-version=V`` (``base_url`` is the
  ``azure_endpoint``); a request without ``api-version`` is answered 404, one whose ``api-key``
  header is not ``key`` 401, as Azure does. ``api_versions`` lists the versions asked for.
- ``FakeGemini``: Google's OpenAI-compatible endpoint, ``POST /v1beta/openai/chat/completions``
  (``base_url`` ends in ``/v1beta/openai/``); a request whose bearer token is not ``key`` is 401.
"""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.openai_server import FakeOpenAI, Item, error

_ids = itertools.count(1)


def anthropic_error(status: int, kind: str, message: str = "", headers: dict | None = None) -> Item:
    """An error in the Messages API's shape ({"type": "error", "error": {"type", "message"}})."""
    return error(status, {"type": "error", "error": {"type": kind, "message": message or f"scripted {kind}"}},
                 headers)


class FakeAnthropic(FakeOpenAI):
    route = "/v1/messages"
    base_path = ""

    def __init__(self, script, *, key: str | None = None, cache_read: int = 0, **kwargs: Any):
        kwargs.setdefault("model", "claude-fake-1")
        super().__init__(script, **kwargs)
        self.key, self.cache_read = key, cache_read

    def gate(self, path: str, headers: dict[str, str]) -> Item | None:
        if "anthropic-version" not in headers:
            return anthropic_error(400, "invalid_request_error", "anthropic-version header is required")
        if self.key is not None and self.key not in (headers.get("x-api-key"), _bearer(headers)):
            return anthropic_error(401, "authentication_error", "invalid x-api-key")
        return None

    def respond_chat(self, body: Any, item: Item | None = None) -> tuple[int, Any, dict]:
        item = item or self._take()
        if item is None or item[0] not in ("text", "tool_calls"):
            return super().respond_chat(body, item or ("error", 400, {"type": "error", "error": {
                "type": "invalid_request_error", "message": "fake server: script exhausted"}},
                {"x-should-retry": "false"}))
        kind, payload, (prompt, completion), *said = item
        if kind == "tool_calls":
            content = [{"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name,
                        "input": arguments} for name, arguments in payload]
        else:
            content = [{"type": "text", "text": payload}]
        model = body.get("model", self.model) if isinstance(body, dict) else self.model
        return 200, {"id": f"msg_fake_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
                     "content": content, "stop_reason": "tool_use" if kind == "tool_calls" else
                     "max_tokens" if said == ["length"] else "end_turn",
                     "stop_sequence": None,
                     "usage": {"input_tokens": prompt, "output_tokens": completion,
                               "cache_read_input_tokens": self.cache_read, "cache_creation_input_tokens": 0}}, {}


def _bearer(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    return value.removeprefix("Bearer ") if value.startswith("Bearer ") else None


class FakeAzure(FakeOpenAI):
    base_path = ""

    def __init__(self, script, *, deployment: str = "dep-1", key: str = "azure-fake-key", **kwargs: Any):
        super().__init__(script, **kwargs)
        self.deployment, self.key = deployment, key
        self.route = f"/openai/deployments/{deployment}/chat/completions"
        self.api_versions: list[str] = []

    def gate(self, path: str, headers: dict[str, str]) -> Item | None:
        versions = parse_qs(urlsplit(path).query).get("api-version")
        if not versions:
            return error(404, {"error": {"code": "404", "message": "Resource not found"}})
        with self._lock:
            self.api_versions.append(versions[0])
        if headers.get("api-key") != self.key:
            return error(401, {"error": {"code": "401", "message": "Access denied due to invalid subscription key "
                                                                   "or wrong API endpoint."}})
        return None


class FakeGemini(FakeOpenAI):
    route = "/v1beta/openai/chat/completions"
    base_path = "/v1beta/openai/"

    def __init__(self, script, *, key: str = "gemini-fake-key", **kwargs: Any):
        kwargs.setdefault("model", "gemini-fake-1")
        super().__init__(script, **kwargs)
        self.key = key

    def gate(self, path: str, headers: dict[str, str]) -> Item | None:
        if headers.get("authorization") != f"Bearer {self.key}":
            return error(401, {"error": {"code": 401, "message": "API key not valid.", "status": "UNAUTHENTICATED"}})
        return None
