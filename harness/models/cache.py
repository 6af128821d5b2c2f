"""A response cache for development (`--cache DIR`): a request asked before is answered from DIR.

Off by default. With it, each metered model call (models/meter.py) first looks its request up: a hit
is answered with the reply kept for it, rebuilt by the runner the way a replay model rebuilds a
recorded turn (chat.Reply.of_turn, AutoGen's to_create_results), and the provider is not called (no
slot, no `--max-cost` admission, no cost: a hit's row counts its tokens and the call, at $0); a miss
calls the provider and keeps the reply. Hits are counted in the row's usage (`cache_hits`) and the
report, and their `model_call` trace events say `cached: true`.

The key is a SHA-256 of, as JSON with sorted keys:
- the model: the section's provider, model, endpoint and Azure deployment;
- the request's messages and tool schemas, as the runner sends them, with every text made as
  the replay model's fingerprints make tool results (replay.normalised: durations, clock times,
  addresses, hex runs such as container names, /tmp/ paths masked; whitespace collapsed), so a
  re-run whose tool results differ only there still hits; pictures (data URLs, AutoGen's image
  `data`) are kept as they are;
  tool-call ids (random per reply) are replaced by their order of appearance;
- the sampling parameters (the section's temperature and max_tokens, and what the runner adds);
- the epoch (each epoch of `--epochs K` is its own sample).

Layout: DIR/<2 hex>/<64 hex>.json, {"key", "model", "turn"}; each written with fsutil.write_atomic,
so agents of many processes (and runs) may share DIR: a reader sees a whole entry or none, and an
entry that cannot be read is a miss. The LLM judge uses it only with `--cache-judge`
(models/completion.py), its entries keyed as a one-message request.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from harness.fsutil import write_atomic
from harness.models.replay import normalised

if TYPE_CHECKING:
    from harness.models.config import ModelSection

T = TypeVar("T")
_IDS = ("id", "tool_call_id", "call_id")  # keys whose values are a reply's random tool-call ids


class ResponseCache:
    """The cache in `directory`, for one instance's `epoch`."""

    def __init__(self, directory: str | Path, epoch: int = 1):
        self.directory, self.epoch = Path(directory), epoch

    def key(self, section: ModelSection, messages: Any, tools: Any, sampling: dict[str, Any]) -> str:
        model = {"provider": section.provider, "model": section.model, "endpoint": section.endpoint(),
                 "azure": [section.azure_endpoint, section.deployment]}
        sampling = {"temperature": section.temperature, "max_tokens": section.max_tokens, **sampling}
        body = {"model": model, "messages": canonical(messages, {}), "tools": canonical(tools, {}),
                "sampling": canonical(sampling, {}), "epoch": self.epoch}
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The turn kept for `key`, or None (none kept, or an entry that cannot be read)."""
        try:
            entry = json.loads(self.path(key).read_text())
        except (OSError, ValueError):
            return None
        turn = entry.get("turn") if isinstance(entry, dict) and entry.get("key") == key else None
        return turn if isinstance(turn, dict) else None

    def put(self, key: str, model: str, turn: dict[str, Any]) -> None:
        """Keep `turn` for `key` (a cache that cannot be written is only a cache: no error)."""
        path = self.path(key)
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps({"key": key, "model": model, "turn": turn}), durable=False)


@dataclass
class CachedCall(Generic[T]):
    """One call's entry: its key, and how the runner rebuilds its reply from a kept turn."""

    cache: ResponseCache
    key: str
    rebuild: Callable[[dict[str, Any]], T]

    def hit(self) -> dict[str, Any] | None:
        return self.cache.get(self.key)

    def keep(self, model: str, turn: dict[str, Any]) -> None:
        self.cache.put(self.key, model, turn)


def canonical(value: Any, ids: dict[str, int]) -> Any:
    """`value` as the key sees it: texts normalised (data URLs and AutoGen's base64 image `data` kept),
    tool-call ids by order of appearance."""
    if isinstance(value, dict):
        return {k: _id(v, ids) if k in _IDS and isinstance(v, str) else v if k == "data" and isinstance(v, str)
                else canonical(v, ids) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical(v, ids) for v in value]
    if isinstance(value, str):
        return value if value.startswith("data:") else normalised(value)
    return value


def _id(value: str, ids: dict[str, int]) -> str:
    return f"<call {ids.setdefault(value, len(ids))}>"
