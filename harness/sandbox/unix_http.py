"""HTTP to a service on a Unix socket: urllib3's pool with a connection that dials the socket
(`UnixConnectionPool`), and a loopback TCP port forwarded to the socket for clients that speak
only TCP, such as Playwright's CDP connection (`Forward`). Both dial through `connect`, which
connects only to a socket of this user, following no link."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading

import urllib3
from urllib3.connection import HTTPConnection
from urllib3.exceptions import NewConnectionError

from harness.errors import SocketRefused


def connect(path: str, timeout: float | None = None) -> socket.socket:
    """A connection to the Unix socket at `path`, which must be a socket owned by this process's user: the
    path's last component is opened without following it (O_PATH | O_NOFOLLOW), checked, and connected to
    through that descriptor, so whatever else is put under that name (a FIFO, a link, a file, a socket of
    another user) is refused (SocketRefused), never followed nor swapped in between check and connect."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise SocketRefused(f"{path}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.geteuid():
            what = "a socket" if stat.S_ISSOCK(info.st_mode) else f"not a socket (mode {info.st_mode:o})"
            raise SocketRefused(f"{path} is {what} owned by uid {info.st_uid}: only a socket of this user "
                                f"(uid {os.geteuid()}) is connected to")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(f"/proc/self/fd/{fd}")  # the inode checked above, whatever the name holds now
        except BaseException:
            sock.close()
            raise
        return sock
    finally:
        os.close(fd)


class _UnixConnection(HTTPConnection):
    path = ""  # set per pool by UnixConnectionPool

    def _new_conn(self) -> socket.socket:
        try:
            return connect(self.path, self.timeout if isinstance(self.timeout, (int, float)) else None)
        except OSError as exc:
            raise NewConnectionError(self, f"Failed to connect to {self.path}: {exc}") from exc


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
            try:
                upstream = connect(self.path)
            except (OSError, SocketRefused):
                client.close()
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
