"""Recorded model turns, played back per instance (offline runs) or recorded from a real run.

File format: JSONL, one line per instance:

    {"instance_id": "...", "turns": [TURN, ...]}

where each TURN is what the model answered to one call, in order:

    {"content": "text of the answer", "usage": {"prompt_tokens": 120, "completion_tokens": 30}}
    {"tool_calls": [{"name": "run_python", "arguments": {"code": "print(1)"}}], "usage": {...}}

`usage` is optional (zeros). A turn with `"needs_image": true` answers only a request that carries an
image (an image part: the model's vision is on and the picture was sent, harness/environments/images.py);
replaying it to a request without one is a model error (`needs_image`): a recording can so check that a
picture really reached the model. `harness run --record FILE` writes this format from a
real model's answers (the traces' model_call events), so any run can be replayed later.
Each agent process receives only its own instance's turns.

Transcriptions. A replay model answers transcribe_audio too (harness/environments/audio.py): a turn
whose tool calls transcribed audio keeps each transcript under the audio's sha256 (16 hex digits of
the bytes sent), as --record writes it from the trace's `audio` env events:

    {"tool_calls": [{"name": "transcribe_audio", ...}],
     "transcripts": {"9b1f0c2d4e6a8b3c": {"model": "whisper-1", "text": "..."}}}

Replaying, the instance's transcripts (of all its turns) answer any request for the same bytes, in the
recorded model's name (the tool's result names it, so the replayed result matches the recorded one); other
audio gets an error result (so a changed file diverges), and an instance without any is offered no
transcribe_audio unless the replay section names a transcription_model.

Fingerprints. A recorded tool-call turn also keeps, per call, a fingerprint of the result the
model saw (None when the recording saw none, e.g. the agent was killed first):

    {"tool_calls": [...], "usage": {...}, "results": [{"status": "ok", "hash": "3f2a9c1b7d0e"}]}

    status  "error" when the tool said it failed: the result is marked is_error, or its text starts
            with "Error" (every tool's way of telling the model an action failed: a page that does
            not load, a link not found, a file not converted) or "[timed out", or it is a command's
            result with a non-zero "exit code: N"; else "ok"
    hash    the first 12 hex digits of the SHA-256 of the normalised text: volatile parts masked
            (durations such as "0.4 s" or "12ms", clock times and ISO timestamps, IPv4 addresses
            and ports, hex runs of 8+ digits as in uuids and container names, /tmp/ paths), then
            whitespace collapsed

Replaying, the parent pairs each tool result of the trace with its recorded fingerprint (the
n-th model call answers with the n-th turn; a call's result is found through its tool_call's
call_id) and every result that differs is a divergence: a `divergence` trace event, counted in
the row (`ResultRow.replay`) and the report. DIVERGES names which way: an error where the
recording had output (the environment is broken: a missing --website, a file not copied), output
where it had an error, or other output (same status, other text). A result with no fingerprint
to compare (a recording made before fingerprints, or a call the recording never saw answered) is
counted as not checked, never as agreeing. The same recording replayed in the same image and
website gives the same texts, so an honest replay of the bundled smoke set never diverges.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict

from harness.errors import InputError
from harness.traces import Divergence, EnvAction, ModelCall, ToolCall, ToolResult


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
        where, head = self._where, _HEAD.match
        with open(self.path, "rb") as fh:
            offset = 0
            for number, line in enumerate(fh, 1):
                size = len(line)
                found = head(line)
                if found is not None and b"\\" not in found[1] and found[2] is None:  # --record's line, no epoch
                    where[found[1][1:-1].decode()] = (offset, size, number)
                elif line.strip():
                    ident, epoch = _key(line, path, number)
                    where[(ident, epoch) if epoch is not None else ident] = (offset, size, number)
                offset += size

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


def needs_image(number: int) -> str:
    """The model error of a replayed turn recorded as needing an image, given a request without one."""
    return (f"replay: turn {number} of the recording answers a request with an image, and this request carries "
            "none (is the model's vision off, or was the picture not sent?)")


def load_turns(path: Path) -> Turns:
    """Each line {"instance_id", "turns"} and optionally "epoch": the turns of that epoch only."""
    return Turns(path)


# A recording: a replay file's Turns, or a dict of the same keys (tests)
Recording: TypeAlias = Turns | Mapping[Any, list[dict[str, Any]]]


def turns_for(turns: Recording, instance_id: str, epoch: int = 1) -> list[dict] | None:
    """The recording for one epoch of an instance: its own line, else the instance's; None if neither."""
    key = (instance_id, epoch) if (instance_id, epoch) in turns else instance_id
    return turns.get(key)


def has_turns(turns: Recording, instance_id: str, epoch: int = 1) -> bool:
    return (instance_id, epoch) in turns or instance_id in turns


# --- fingerprints of tool results (the module docstring has the rule) ---

DIVERGES = {("ok", "error"): "error where the recording had output",
            ("error", "ok"): "output where the recording had an error"}
OTHER_OUTPUT = "other output"
_VOLATILE = [
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"), "<time>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds)\b"), "<secs>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b(localhost):\d+\b"), r"\1:<port>"),
    (re.compile(r"\b[0-9a-fA-F]{8,}\b"), "<hex>"),
    (re.compile(r"/tmp/[^\s'\"]+"), "/tmp/<tmp>"),
    (re.compile(r"\s+"), " "),
]
_EXIT_CODE = re.compile(r"(?:\[timed out[^\n]*\n)?exit code: (-?\d+)")


def normalised(text: str) -> str:
    for pattern, mask in _VOLATILE:
        text = pattern.sub(mask, text)
    return text.strip()


def fingerprint(content: str, is_error: bool = False) -> dict[str, str]:
    """{"status": "ok" | "error", "hash": 12 hex digits} of a tool result as the model saw it."""
    head = content.lstrip()
    code = _EXIT_CODE.match(head)
    failed = is_error or head.startswith(("Error", "[timed out")) or (code is not None and code[1] != "0")
    digest = hashlib.sha256(normalised(content).encode("utf-8", "replace")).hexdigest()[:12]
    return {"status": "error" if failed else "ok", "hash": digest}


def results_per_call(events) -> list[list[ToolResult | None]]:
    """For each model_call of a trace, in order: the results of its tool calls, in the call's order
    (None: no result traced). A model call's tool calls are the tool_call events after it (before
    the next model call) of the same names; a result belongs to the tool_call of its call_id."""
    results = {e.call_id: e for e in events if isinstance(e, ToolResult) and e.call_id}
    per_call: list[list[ToolResult | None]] = []
    waiting: list[tuple[int, str]] = []  # (index in the last model call, tool name) not yet seen as tool_call
    for event in events:
        if isinstance(event, ModelCall):
            calls = event.tool_calls or []
            per_call.append([None] * len(calls))
            waiting = [(i, str(c.get("name", ""))) for i, c in enumerate(calls)]
        elif isinstance(event, ToolCall) and waiting:
            match = next((k for k, (_, name) in enumerate(waiting) if name == event.name), None)
            if match is not None:
                index, _ = waiting.pop(match)
                per_call[-1][index] = results.get(event.call_id)
    return per_call


def recorded_turns(events) -> list[dict]:
    """What --record keeps of a trace: each model call's TURN, a tool-call turn with the fingerprints
    of the results its calls got and the transcripts its calls heard."""
    turns: list[dict[str, Any]] = []
    results = iter(results_per_call(events))
    for event in events:
        if isinstance(event, EnvAction) and event.action == "transcribe_audio" and turns:
            heard = event.model_dump()
            if isinstance(heard.get("transcript"), str) and heard.get("sha256"):
                turns[-1].setdefault("transcripts", {})[heard["sha256"]] = {"model": str(heard.get("model", "")),
                                                                              "text": heard["transcript"]}
        if not isinstance(event, ModelCall):
            continue
        seen = next(results)
        if event.tool_calls:
            prints = [None if r is None else fingerprint(r.content, r.is_error) for r in seen]
            turns.append({"tool_calls": event.tool_calls, "usage": event.usage, "results": prints})
        else:
            turns.append({"content": event.content or "", "usage": event.usage})
        if event.finish_reason == "length":  # a cut reply replays as one
            turns[-1]["finish_reason"] = "length"
    return turns


def recorded_transcripts(turns: list[dict]) -> dict[str, dict[str, str]]:
    """An instance's recorded transcripts ({"model", "text"}), by audio sha256, over all its turns."""
    return {sha: text for turn in turns if isinstance(turn.get("transcripts"), dict)
            for sha, text in turn["transcripts"].items()}


class ReplayCheck(BaseModel):
    """A replayed row's tool results against the recording's fingerprints (`check_replay`), in its row."""

    checked: int = 0  # results compared with the recording's fingerprint
    diverged: int = 0  # of those, results that differ (each a `divergence` event in the trace)
    not_checked: int = 0  # results the recording holds no fingerprint for (an older recording): not judged


def check_replay(turns: list[dict], events) -> tuple[ReplayCheck, list[Divergence]]:
    """This replay's tool results (a trace's events) against the recording's fingerprints (`turns`)."""
    check, found = ReplayCheck(), []
    # strict=False: a replay that makes calls past the recording has no fingerprints for them
    for number, (turn, results) in enumerate(zip(turns, results_per_call(events), strict=False), 1):
        kept = turn.get("results")
        recorded = kept if isinstance(kept, list) else []
        for index, result in enumerate(results):
            if result is None:
                continue  # never answered in this run (the row's status says why)
            expected = recorded[index] if index < len(recorded) else None
            if not isinstance(expected, dict) or "status" not in expected:
                check.not_checked += 1
                continue
            check.checked += 1
            mine = fingerprint(result.content, result.is_error)
            if mine == {"status": expected["status"], "hash": expected.get("hash")}:
                continue
            check.diverged += 1
            found.append(Divergence(turn=number, name=result.name, call_id=result.call_id,
                                    recorded=expected, replayed=mine,
                                    what=DIVERGES.get((expected["status"], mine["status"]), OTHER_OUTPUT),
                                    excerpt=result.content[:300]))
    return check, found
