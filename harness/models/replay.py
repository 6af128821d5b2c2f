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
from pathlib import Path

from harness.errors import InputError


Turns = dict  # instance id -> turns, and (instance id, epoch) -> turns for lines that name an epoch


def load_turns(path: Path) -> Turns:
    """Each line {"instance_id", "turns"} and optionally "epoch": the turns of that epoch only."""
    turns: Turns = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key = str(row["instance_id"])
            turns[(key, int(row["epoch"])) if row.get("epoch") is not None else key] = list(row["turns"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"replay file {path}, line {number}: {exc}") from None
    return turns


def turns_for(turns: Turns, instance_id: str, epoch: int = 1) -> list[dict] | None:
    """The recording for one epoch of an instance: its own line, else the instance's; None if neither."""
    return turns.get((instance_id, epoch), turns.get(instance_id))
