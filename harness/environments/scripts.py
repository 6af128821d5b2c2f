"""The reply of an in-sandbox script that prints one JSON object as its last line.

`script_reply(result, doing, timeout)`: that object; or, when the script was killed at its
timeout, `{"error": "timeout: <doing> took longer than <timeout> s", "outcome": "timeout"}`; or,
when it printed no JSON, `{"error": "<doing> failed: <its stderr or exit code>"}` (`doing` is
a gerund phrase: "fetching URL"). An object
with "error" is a failure the model reads; "outcome" (popped by the caller) overrides the
trace outcome `error`.
"""

from __future__ import annotations

import json

from harness.sandbox.contract import ExecResult


def script_reply(result: ExecResult, doing: str, timeout: float) -> dict:
    if result.timed_out:
        return {"error": f"timeout: {doing} took longer than {timeout:g} s", "outcome": "timeout"}
    try:
        data = json.loads(result.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        data = None
    if not isinstance(data, dict):
        reason = result.stderr.strip()[-1000:] or f"the script exited {result.exit_code} without a message"
        return {"error": f"{doing} failed: {reason}"}
    return data


def outcome_of(data: dict) -> str:
    """The trace outcome of a script's reply (removes its "outcome")."""
    return data.pop("outcome", "error" if "error" in data else "ok")
