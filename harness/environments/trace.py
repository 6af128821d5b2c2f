"""Per-instance trace: one JSON line per event (agent message, model call, environment action).

Each line is flushed as it is written, so a killed agent still leaves its trace.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path


class Tracer:
    def __init__(self, path: Path | None):
        self.path = path
        self._lock = threading.Lock()
        self._fh = open(path, "a", encoding="utf-8") if path else None
        self._t0 = time.monotonic()

    def event(self, record: dict) -> None:
        if self._fh is None:
            return
        line = json.dumps({"t": round(time.monotonic() - self._t0, 4), **record}, default=str)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh:
            self._fh.close()


def read_trace(path: Path) -> list[dict]:
    events = []
    if not path.exists():
        return events
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a torn last line of a killed process
    return events
