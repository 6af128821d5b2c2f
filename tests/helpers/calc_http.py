"""tests/data/mcp/calc_server.py over streamable HTTP on the host: a real remote MCP server for the tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.helpers.e2e import DATA

SERVER = DATA / "mcp" / "calc_server.py"


@contextmanager
def calc_over_http(env: dict[str, str]) -> Iterator[str]:
    """The server started with `env` added (CALC_KEY, CALC_JSON: its docstring), once it listens: its url."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()
