"""The HTTP clients every model call goes through: a model reply has a size limit.

The official client buffers a reply whole before parsing it, so a server that answers 200 and
then sends bytes forever would grow the process without end. `sync_client()` and
`async_client()` (handed to `openai.OpenAI` / `AsyncOpenAI` as `http_client`, by the plain
runner, the AutoGen runner, the LLM judge and the preflight) count each reply's bytes as they
arrive, decoded, and stop reading at HARNESS_MODEL_MAX_REPLY_MIB: `ReplyTooLarge`, a
ModelError naming the limit, and the connection is dropped.

Rules: the count is of the body as the client would hold it, so requests ask for
`Accept-Encoding: identity` and a gzip or deflate body is inflated here, a bounded step at a
time (a small compressed body cannot expand past the limit); any other encoding is refused. A
streamed reply (server-sent events) counts its whole stream. The official client treats an
error while reading as a broken connection and retries it (`max_retries`, each try read only up
to the limit); what is left after the retries names this limit (`too_large` finds it under the
client's own error), in the agents' rows, the judge's error and the preflight's message.
The anthropic SDK speaks through its own HTTP package (httpx2, not httpx): `sdk="anthropic"`
gives its default client with the same limit (the Anthropic provider's calls, models/providers.py).
`paced=True` (the metered calls' clients) leaves a 429's or 503's retry to the Meter (models/pacing.py).
Everything else is the SDK's default client (its timeouts, connection limits, proxies from the
environment).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from harness.errors import ModelError
from harness.models.pacing import leave_to_meter
from harness.settings import settings

if TYPE_CHECKING:  # the SDKs' clients import their HTTP package (_HTTP); a run that calls no model loads none
    import httpx

INFLATE = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class ReplyTooLarge(ModelError):
    """A model reply longer than HARNESS_MODEL_MAX_REPLY_MIB (read no further)."""


def limit_bytes() -> int:
    return int(settings().model_max_reply_mib * 2**20)


def describe_limit() -> str:
    return f"HARNESS_MODEL_MAX_REPLY_MIB={settings().model_max_reply_mib:g}"


def too_large(exc: BaseException | None) -> ReplyTooLarge | None:
    """The ReplyTooLarge behind an error (the client wraps it in its connection error), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ReplyTooLarge):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def sync_client(sdk: str = "openai", **kwargs) -> Any:
    """The SDK's default HTTP client with the reply limit (for `openai.OpenAI(http_client=...)`, or
    `anthropic.Anthropic(...)` with sdk="anthropic")."""
    module = importlib.import_module(sdk)
    counted = _counting(importlib.import_module(_HTTP[sdk]))

    def cap(response: httpx.Response) -> None:
        _cap(response, counted)

    return module.DefaultHttpxClient(event_hooks={"request": [_identity], "response": [cap]}, **kwargs)


def async_client(sdk: str = "openai", *, paced: bool = False, **kwargs) -> Any:
    """The same for `openai.AsyncOpenAI(http_client=...)` (and AutoGen's OpenAI clients), or the
    anthropic SDK's AsyncAnthropic; `paced`: for metered calls, whose 429s and 503s the Meter
    retries, not the SDK (models/pacing.py)."""
    module = importlib.import_module(sdk)
    counted = _counting(importlib.import_module(_HTTP[sdk]))

    async def identity(request: httpx.Request) -> None:
        _identity(request)

    async def cap(response: httpx.Response) -> None:
        if paced:
            leave_to_meter(response)
        _cap(response, counted)

    return module.DefaultAsyncHttpxClient(event_hooks={"request": [identity], "response": [cap]}, **kwargs)


_HTTP = {"openai": "httpx", "anthropic": "httpx2"}  # the HTTP package each SDK's client is built on


@functools.cache
def _counting(http: ModuleType) -> type[_Counted]:
    """_Counted as a body stream of `http` (httpx or httpx2: each checks its own stream types)."""
    return type("Counted", (_Counted, http.SyncByteStream, http.AsyncByteStream), {})


_SENDING: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("model_sending", default=None)


@contextlib.contextmanager
def on_send(callback: Callable[[], None]) -> Iterator[None]:
    """While open, every request a client of this module sends in this context (its SDK's retries
    included; tasks started inside inherit it) calls `callback` first: the Meter traces each attempt."""
    token = _SENDING.set(callback)
    try:
        yield
    finally:
        _SENDING.reset(token)


def _identity(request: httpx.Request) -> None:
    if (callback := _SENDING.get()) is not None:
        callback()
    request.headers["Accept-Encoding"] = "identity"


def _cap(response: httpx.Response, counted: type[_Counted]) -> None:
    """Replace the reply's body stream with one that counts (and inflates) it; httpx then decodes nothing."""
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower() or "identity"
    if encoding != "identity" and encoding not in INFLATE:
        response.close()
        raise ModelError(f"the model server sent a reply encoded {encoding!r} (identity was asked for)")
    if encoding != "identity":
        del response.headers["Content-Encoding"]
    stream: Any = counted(response.stream, limit_bytes(), None if encoding == "identity" else INFLATE[encoding])
    response.stream = stream  # one of the HTTP package's body streams (_counting)


class _Counted:
    """A body stream (made one of an HTTP package's by _counting) that yields at most `limit` bytes
    (inflated with `wbits` when set), then raises."""

    def __init__(self, inner, limit: int, wbits: int | None):
        self._inner, self._limit, self._seen = inner, limit, 0
        self._inflate = None if wbits is None else zlib.decompressobj(wbits)

    def _take(self, chunk: bytes) -> Iterator[bytes]:
        if self._inflate is None:
            yield self._count(chunk)
            return
        try:
            while chunk:
                out = self._inflate.decompress(chunk, self._limit - self._seen + 1)
                yield self._count(out)
                chunk = self._inflate.unconsumed_tail
        except zlib.error as exc:
            raise ModelError(f"the model server's compressed reply is corrupt: {exc}") from None

    def _count(self, data: bytes) -> bytes:
        self._seen += len(data)
        if self._seen > self._limit:
            raise ReplyTooLarge(f"the reply is longer than {self._limit / 2**20:g} MiB ({describe_limit()}); "
                                "read no further")
        return data

    def _rest(self) -> bytes:
        return b"" if self._inflate is None else self._count(self._inflate.flush())

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            yield from self._take(chunk)
        yield self._rest()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            for data in self._take(chunk):
                yield data
        yield self._rest()

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()
