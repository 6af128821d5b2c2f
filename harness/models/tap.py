"""A reply's token classes read off the wire (harness/usage.py), for clients that drop them.

AutoGen's clients keep only prompt and completion tokens of a reply (its RequestUsage), so the
AutoGen runner's HTTP clients are `tapped`: while a metered call is open (`tap`, Meter.call), a
JSON reply's `usage` is read off the wire and the meter takes its classes from there. A streamed
reply (server-sent events) is not read: it keeps AutoGen's two classes.

What makes two calls comparable is read the same way, for every metered client (`heard`, filled while the tap
is open): the request's sampling as sent (the JSON body's SAMPLING keys, e.g. temperature, top_p, seed,
max_tokens) and the reply's model id and `system_fingerprint` (the provider's build; None when it sends
none). The Meter puts them in the call's `model_call` event (response_model, fingerprint, sampling).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator
from typing import Any

from harness.usage import counts

_TAP: contextvars.ContextVar[list[dict[str, int]] | None] = contextvars.ContextVar("usage_tap", default=None)
_HEARD: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("call_identity", default=None)
# the request keys that decide how a reply is sampled
SAMPLING = ("temperature", "top_p", "top_k", "seed", "max_tokens", "max_completion_tokens", "n", "presence_penalty",
            "frequency_penalty", "stop", "reasoning_effort")


@contextlib.contextmanager
def tap(seen: list[dict[str, int]], heard: dict[str, Any] | None = None) -> Iterator[None]:
    """While open, replies read by a `tapped` client in this context append their classes to `seen`
    (tasks started inside inherit it: AutoGen's clients make their requests in tasks of their own), and
    the last request's sampling and reply's model id and fingerprint go in `heard`."""
    token, said = _TAP.set(seen), _HEARD.set(heard)
    try:
        yield
    finally:
        _TAP.reset(token)
        _HEARD.reset(said)


def sent(body: Any) -> None:
    """A request's JSON body, for the open tap: its sampling keys."""
    heard = _HEARD.get()
    if heard is not None and isinstance(body, dict):
        heard["sampling"] = {k: body[k] for k in SAMPLING if body.get(k) is not None}


def answered(reply: Any) -> None:
    """A reply's JSON body, for the open tap: the model id it names and its system_fingerprint."""
    heard = _HEARD.get()
    if heard is not None and isinstance(reply, dict):
        model, fingerprint = reply.get("model"), reply.get("system_fingerprint")
        heard["response_model"] = model if isinstance(model, str) else None
        heard["fingerprint"] = fingerprint if isinstance(fingerprint, str) else None


def overheard(usage: Any) -> None:
    """A reply's usage, for the open `tap` (a replay client's recorded turn: no wire to read it from)."""
    seen = _TAP.get()
    if seen is not None and usage:
        seen.append(counts(usage))


def tapped(client: Any, usage: bool = True) -> Any:
    """An async httpx (or httpx2) client that reports each request's sampling and each JSON reply's identity
    (and with `usage`, its usage) to the open `tap`."""
    async def read_request(request: Any) -> None:
        if _HEARD.get() is None or "json" not in request.headers.get("content-type", ""):
            return
        try:
            sent(json.loads(request.content))
        except (ValueError, AttributeError, RuntimeError):  # RuntimeError: a streamed body, not read here
            return

    async def read_reply(response: Any) -> None:
        if (_TAP.get() is None and _HEARD.get() is None) or "json" not in response.headers.get("content-type", ""):
            return
        await response.aread()  # the body the client reads next anyway (through the size cap, models/http.py)
        try:
            body = json.loads(response.content)
        except ValueError:
            return
        if not isinstance(body, dict):
            return
        answered(body)
        if usage and isinstance(body.get("usage"), dict):
            overheard(body["usage"])

    hooks = client.event_hooks
    client.event_hooks = {**hooks, "request": [*hooks.get("request", []), read_request],
                          "response": [*hooks.get("response", []), read_reply]}
    return client
