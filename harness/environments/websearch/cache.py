"""Searches cached per run directory, keyed by (provider, query, options), so epochs, retries and
resumes do not pay twice. One JSON file per key under RUN_DIR/search-cache/, written atomically (agent
processes of one run share it); a file that does not read is a miss. `--no-search-cache` turns it off.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from harness.environments.websearch.providers import Hit
from harness.fsutil import write_atomic


def key(provider: str, query: str, options: dict) -> str:
    blob = json.dumps([provider, query, options], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class SearchCache:
    def __init__(self, folder: Path):
        self.folder = folder

    def get(self, name: str) -> list[Hit] | None:
        try:
            data = json.loads((self.folder / f"{name}.json").read_text(encoding="utf-8"))
            return [Hit(**hit) for hit in data]
        except (OSError, ValueError, TypeError):
            return None

    def put(self, name: str, hits: list[Hit]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_atomic(self.folder / f"{name}.json", json.dumps([h.to_json() for h in hits]), durable=False)
