"""A reply's token classes read off the wire (harness/usage.py), for clients that drop them.

AutoGen's clients keep only prompt and completion tokens of a reply (its RequestUsage), so the
AutoGen runner's HTTP clients are `tapped`: while a metered call is open (`tap`, Meter.call), a
JSON reply's `usage` is read off the wire and the meter takes its classes from there. A streamed
reply (server-sent events) is not read: it keeps AutoGen's two classes.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator
from typing import Any

from harness.usage import counts

_TAP: contextvars.ContextVar[list[dict[str, int]] | None] = contextvars.ContextVar("usage_tap", default=None)


@contextlib.contextmanager
def tap(seen: list[dict[str, int]]) -> Iterator[None]:
    """While open, replies read by a `tapped` client in this context append their classes to `seen`
    (tasks started inside inherit it: AutoGen's clients make their requests in tasks of their own)."""
    token = _TAP.set(seen)
    try:
        yield
    finally:
        _TAP.reset(token)


def overheard(usage: Any) -> None:
    """A reply's usage, for the open `tap` (a replay client's recorded turn: no wire to read it from)."""
    seen = _TAP.get()
    if seen is not None and usage:
        seen.append(counts(usage))


def tapped(client: Any) -> Any:
    """An async httpx (or httpx2) client that reports each JSON reply's usage to the open `tap`."""
    async def read_usage(response: Any) -> None:
        seen = _TAP.get()
        if seen is None or "json" not in response.headers.get("content-type", ""):
            return
        await response.aread()  # the body the client reads next anyway (through the size cap, models/http.py)
        try:
            usage = json.loads(response.content).get("usage")
        except (ValueError, AttributeError):
            return
        if isinstance(usage, dict):
            overheard(usage)

    hooks = client.event_hooks
    client.event_hooks = {**hooks, "response": [*hooks.get("response", []), read_usage]}
    return client
