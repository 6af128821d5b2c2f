"""Recorded model turns, played back per instance (offline runs) or recorded from a real run.

File format: JSONL, one line per instance:

    {"instance_id": "...", "turns": [TURN, ...]}

where each TURN is what the model answered to one call, in order:

    {"content": "text of the answer", "usage": {"prompt_tokens": 120, "completion_tokens": 30}}
    {"tool_calls": [{"name": "run_python", "arguments": {"code": "print(1)"}}], "usage": {...}}

`usage` is optional (zeros). `harness run --record FILE` writes this format from a
real model's answers, so any run can be replayed later.
"""

from __future__ import annotations

import json
import uuid
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


def to_create_results(turns: list[dict]):
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage

    results = []
    for turn in turns:
        usage = RequestUsage(**{"prompt_tokens": 0, "completion_tokens": 0, **turn.get("usage", {})})
        if turn.get("tool_calls"):
            calls = [FunctionCall(id=f"call_{uuid.uuid4().hex[:12]}", name=c["name"],
                                  arguments=json.dumps(c.get("arguments", {})))
                     for c in turn["tool_calls"]]
            results.append(CreateResult(finish_reason="function_calls", content=calls, usage=usage, cached=False))
        else:
            results.append(CreateResult(finish_reason="stop", content=turn.get("content", ""), usage=usage,
                                        cached=False))
    return results


def turn_from_result(result) -> dict:
    """The replay TURN for one CreateResult (used when recording)."""
    usage = {"prompt_tokens": result.usage.prompt_tokens, "completion_tokens": result.usage.completion_tokens}
    if isinstance(result.content, list):
        calls = []
        for call in result.content:
            try:
                arguments = json.loads(call.arguments)
            except (json.JSONDecodeError, TypeError):
                arguments = {"_raw": call.arguments}
            calls.append({"name": call.name, "arguments": arguments})
        return {"tool_calls": calls, "usage": usage}
    return {"content": result.content, "usage": usage}
