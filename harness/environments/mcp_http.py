"""The HTTP client a `url` MCP server is reached with: no answer of it is held past MAX_MESSAGE_BYTES.

The mcp SDK reads a JSON answer whole (`response.aread()`) and bounds only server-sent events (its
`max_sse_event_size`, given MAX_MESSAGE_BYTES in mcp_tools.py, as a stdio server's line is bounded by the
bridge). `bounded_client` gives the SDK an httpx2 client whose transport counts each answer's bytes as they
arrive: one that is not an event stream and passes the limit (or says in its Content-Length that it will)
is closed there, and its read fails with McpAnswerTooLarge, an httpx2 StreamError the SDK turns into
the request's error at once ("Failed to parse JSON response: the server's answer had N bytes, ...").
The limit is on the bytes as they come (before any content decoding).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from harness.environments.mcp_bridge import MAX_MESSAGE_BYTES


class McpAnswerTooLarge(httpx2.StreamError):
    """A url server's answer passed the limit of one MCP message."""


def too_large(size: int | None, limit: int) -> McpAnswerTooLarge:
    said = f"had {size} bytes" if size is not None else f"had more than {limit} bytes"
    return McpAnswerTooLarge(f"the server's answer {said}, more than the {limit} an MCP message may have; "
                             "it was not read")


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int, declared: int | None):
        self.stream, self.limit, self.declared = stream, limit, declared

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.declared is not None and self.declared > self.limit:
            await self.stream.aclose()
            raise too_large(self.declared, self.limit)
        seen = 0
        async for chunk in self.stream:
            seen += len(chunk)
            if seen > self.limit:
                await self.stream.aclose()
                raise too_large(self.declared, self.limit)
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport whose answers (event streams aside) end in McpAnswerTooLarge past `limit` bytes."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int = MAX_MESSAGE_BYTES):
        self.inner, self.limit = inner, limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return response  # each event is bounded by the SDK's max_sse_event_size
        length = response.headers.get("content-length", "")
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _Bounded(response.stream, self.limit, int(length) if length.isdigit() else None)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def bounded_client(headers: dict[str, str], limit: int = MAX_MESSAGE_BYTES) -> httpx2.AsyncClient:
    """An httpx2 client as the SDK's create_mcp_http_client makes it (its timeouts), its answers bounded."""
    return httpx2.AsyncClient(headers=headers, transport=BoundedTransport(httpx2.AsyncHTTPTransport(), limit),
                              timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT))
