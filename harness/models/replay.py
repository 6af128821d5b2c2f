"""Recorded model turns, played back per instance (offline runs) or recorded from a real run.

File format: JSONL, one line per instance:

    {"instance_id": "...", "turns": [TURN, ...]}

where each TURN is what the model answered to one call, in order:

    {"content": "text of the answer", "usage": {"prompt_tokens": 120, "completion_tokens": 30}}
    {"tool_calls": [{"name": "run_python", "arguments": {"code": "print(1)"}}], "usage": {...}}

`usage` is optional (zeros). `harness run --record FILE` writes this format from a
real model's answers (the traces' model_call events), so any run can be replayed later.
Each agent process receives only its own instance's turns.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness.errors import InputError


class _Key(BaseModel):
    """What indexing needs of a line (its turns are skipped, not decoded)."""

    model_config = ConfigDict(extra="ignore")
    instance_id: str | int
    epoch: int | None = None


class Turns:
    """A replay file indexed by instance id, and (instance id, epoch) for lines that name an epoch.

    Only each line's key is read up front; a line's turns are decoded when that instance runs
    (its offset is kept), so a 100,000-line recording costs the run neither the time to decode
    every turn nor the memory to hold them."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._where: dict[str | tuple[str, int], tuple[int, int, int]] = {}  # key -> offset, length, line
        with open(self.path, "rb") as fh:
            offset = 0
            for number, line in enumerate(fh, 1):
                if line.strip():
                    ident, epoch = _key(line, path, number)
                    self._where[(ident, epoch) if epoch is not None else ident] = (offset, len(line), number)
                offset += len(line)

    def get(self, key, default=None):
        if key not in self._where:
            return default
        offset, length, number = self._where[key]
        with open(self.path, "rb") as fh:
            fh.seek(offset)
            line = fh.read(length)
        try:
            return list(json.loads(line)["turns"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"replay file {self.path}, line {number}: {exc}") from None

    def __contains__(self, key) -> bool:
        return key in self._where


# A line --record wrote starts with its key ({"instance_id": "...", "epoch": N, "turns": ...}): read it
# off the head instead of parsing every turn; any other line is parsed in full.
_HEAD = re.compile(rb'^\{"instance_id": ?("(?:[^"\\]|\\.)*"), ?(?:"epoch": ?(\d+), ?)?"turns":')


def _key(line: bytes, path: Path, number: int) -> tuple[str, int | None]:
    head = _HEAD.match(line)
    if head is not None:
        literal = head[1]
        ident = literal[1:-1].decode() if b"\\" not in literal else json.loads(literal)
        return ident, int(head[2]) if head[2] else None
    try:
        key = _Key.model_validate_json(line)
    except ValueError as exc:
        raise InputError(f"replay file {path}, line {number}: {str(exc).splitlines()[0]}") from None
    return str(key.instance_id), key.epoch


def load_turns(path: Path) -> Turns:
    """Each line {"instance_id", "turns"} and optionally "epoch": the turns of that epoch only."""
    return Turns(path)


def turns_for(turns: Turns, instance_id: str, epoch: int = 1) -> list[dict] | None:
    """The recording for one epoch of an instance: its own line, else the instance's; None if neither."""
    key = (instance_id, epoch) if (instance_id, epoch) in turns else instance_id
    return turns.get(key)


def has_turns(turns: Turns, instance_id: str, epoch: int = 1) -> bool:
    return (instance_id, epoch) in turns or instance_id in turns
