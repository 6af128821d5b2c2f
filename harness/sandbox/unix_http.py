"""HTTP to a service on a Unix socket: urllib3's pool with a connection that dials the socket
(`UnixConnectionPool`), and a loopback TCP port forwarded to the socket for clients that speak
only TCP, such as Playwright's CDP connection (`Forward`)."""

from __future__ import annotations

import contextlib
import socket
import threading

import urllib3
from urllib3.connection import HTTPConnection
from urllib3.exceptions import NewConnectionError


class _UnixConnection(HTTPConnection):
    path = ""  # set per pool by UnixConnectionPool

    def _new_conn(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if isinstance(self.timeout, (int, float)):
            sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError as exc:
            sock.close()
            raise NewConnectionError(self, f"Failed to connect to {self.path}: {exc}") from exc
        return sock


class UnixConnectionPool(urllib3.HTTPConnectionPool):
    def __init__(self, path: str, **options):
        super().__init__("localhost", **options)
        self.ConnectionCls = type("UnixConnection", (_UnixConnection,), {"path": path})


class Forward:
    """127.0.0.1:port (an ephemeral port), each connection piped both ways to the socket at `path`, until
    `close`. Threads only (no event loop of its own): two per open connection, one accepting."""

    def __init__(self, path: str):
        self.path = path
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="unix-forward", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(self.path)
            except OSError:
                client.close()
                upstream.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
            ends = [2]  # directions still open; the last to end closes both sockets
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink, ends), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, ends: list[int]) -> None:
        try:
            while data := source.recv(1 << 16):
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
        with self._lock:
            ends[0] -= 1
            if ends[0]:
                return
            self._open.difference_update((source, sink))
        source.close()
        sink.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._server.close()
        with self._lock:
            held = list(self._open)
        for sock in held:  # their pipes end, and close them
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
