"""A small MCP server for the tests, written with the official SDK (mcp 2: MCPServer, FastMCP's successor).

    python3 calc_server.py            # stdio (the harness starts it inside a sandbox: --mcp)
    python3 calc_server.py http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp (a remote server)

With http, a request whose X-Test-Key header differs from $CALC_KEY (when that is set) is refused 401;
CALC_JSON=1 answers each request with one JSON body instead of an event stream.
"""

import os
import struct
import sys
import zlib

from mcp.server.mcpserver import Image, MCPServer

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"the sum is {a + b}"


@server.tool(name="where.am-i")
def where() -> str:
    """Say where this server runs: its host name and working directory."""
    return f"host {os.uname().nodename} cwd {os.getcwd()} mode {os.environ.get('CALC_MODE', '-')}"


@server.tool()
def fail(reason: str = "asked to") -> str:
    """Always fails."""
    raise ValueError(f"failed because {reason}")


@server.tool()
def big(chars: int) -> str:
    """Return that many characters."""
    return "x" * chars


@server.tool()
def picture(width: int = 12, height: int = 6) -> list:
    """Draw a green rectangle of that size: a caption, then the PNG as an image part."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes((10, 160, 40)) * width for _ in range(height))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return [f"a {width}x{height} green rectangle", Image(data=png, format="png")]


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        import uvicorn
        from starlette.middleware.base import BaseHTTPMiddleware
        from starlette.responses import PlainTextResponse

        app = server.streamable_http_app(json_response=os.environ.get("CALC_JSON") == "1")
        key = os.environ.get("CALC_KEY")

        async def check_key(request, call_next):
            if key and request.headers.get("x-test-key") != key:
                return PlainTextResponse("bad key", status_code=401)
            return await call_next(request)

        app.add_middleware(BaseHTTPMiddleware, dispatch=check_key)
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run()
