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


def load_turns(path: Path) -> dict[str, list[dict]]:
    turns: dict[str, list[dict]] = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            turns[str(row["instance_id"])] = list(row["turns"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"replay file {path}, line {number}: {exc}") from None
    return turns
