"""Host-side client of sandboxd, the in-container service (images/sandbox/sandboxd.py).

urllib3 keeps connections alive and sets TCP_NODELAY, so a command costs a few
milliseconds instead of the ~50 ms of a `docker exec`.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Callable

import urllib3

from harness.errors import InfraError


class ServiceUnreachable(InfraError):
    """The connection to sandboxd failed (the caller checks whether the sandbox died)."""


# Extra seconds the HTTP call waits beyond a command's own timeout: the service
# needs a moment to kill the process tree and answer after the deadline.
EXEC_GRACE_S = 15.0


class ServiceClient:
    def __init__(self, host: str, port: int, token: str, *, pool: int = 4):
        self.host, self.port, self.token = host, port, token
        self._pool = urllib3.HTTPConnectionPool(host, port, maxsize=pool, block=False, retries=False)

    def _request(self, method: str, path: str, *, body: bytes | None = None,
                 timeout: float = 30.0) -> urllib3.BaseHTTPResponse:
        try:
            return self._pool.request(
                method, path, body=body, headers={"X-Harness-Token": self.token},
                timeout=urllib3.Timeout(connect=5.0, read=timeout), preload_content=True,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise ServiceUnreachable(f"sandbox service {self.host}:{self.port}: {exc}") from exc

    def _json(self, method: str, path: str, **kwargs) -> dict:
        resp = self._request(method, path, **kwargs)
        data = json.loads(resp.data or b"{}")
        if resp.status != 200:
            raise RequestRefused(resp.status, data.get("error", resp.data[:500].decode(errors="replace")))
        return data

    def wait_ready(self, timeout: float, still_starting: Callable[[], None]) -> None:
        """Poll /health until it answers; still_starting() raises if the container died."""
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                resp = self._pool.request("GET", "/health", headers={"X-Harness-Token": self.token},
                                          timeout=urllib3.Timeout(connect=1.0, read=2.0))
                if resp.status == 200:
                    return
            except urllib3.exceptions.HTTPError:
                pass
            still_starting()
            if time.monotonic() > deadline:
                raise InfraError(f"sandbox service {self.host}:{self.port} not ready after {timeout:.0f}s")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.1)

    def exec(self, payload: dict, timeout: float) -> dict:
        return self._json("POST", "/exec", body=json.dumps(payload).encode(),
                          timeout=timeout + EXEC_GRACE_S)

    def upload(self, tar_bytes: bytes, dest: str) -> list[str]:
        path = "/upload?" + urllib.parse.urlencode({"dest": dest})
        return self._json("POST", path, body=tar_bytes, timeout=120)["written"]

    def read_file(self, path: str) -> bytes:
        resp = self._request("GET", "/file?" + urllib.parse.urlencode({"path": path}), timeout=60)
        if resp.status != 200:
            raise RequestRefused(resp.status, json.loads(resp.data or b"{}").get("error", ""))
        return resp.data

    def start_browser(self, force: bool = False) -> dict:
        """Start (or find, or restart) Chromium inside the sandbox; returns its DevTools ws path.
        force: kill a running but stuck Chromium first."""
        return self._json("POST", "/browser/start" + ("?force=1" if force else ""), timeout=90)

    def close(self) -> None:
        self._pool.close()


class RequestRefused(Exception):
    """sandboxd answered but refused the request (bad path, missing file...)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status, self.message = status, message
