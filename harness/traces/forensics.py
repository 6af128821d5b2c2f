"""What the parent learns from an ended agent's trace, in one read.

An agent process that was killed, or ended on a limit or an error, may not have said in its result
all it did; its trace has. `read_facts` reads a trace once, after its agent process has ended (no
writer is left), and keeps everything the parent asks of it:

- `usage`: model calls and tokens by class summed over the `model_call` events (a killed agent's
  usage; unpriced: the runner prices it);
- `last_message`: the text of the last `message` event; `tool_calls`: the `tool_call` names in order;
- `waiting_on_model(now)`: why a killed agent's row is the model's error, or None (rule below);
- `env_outcomes`: env -> outcome -> count of the `env` actions (the row's env_outcomes);
- `text_calls`: the text of each reply that was a tool call written as text (a `model_call` naming its
  `text_tool_call`: models/textcalls.py), stripped: the row's count, and whether its answer is one;
- `cut_replies`: the replies cut at a token cap (a `model_call` whose `finish_reason` is `length`);
- `events`: every event, for the replay check (models/replay.py check_replay).

A missing trace reads as an empty one; torn and unknown lines are skipped (events.py read_trace).
What the parent appends afterwards (a kill's `limit`, divergences, the verdict: runner/appends.py)
changes none of these facts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.traces.events import (
    EnvAction,
    ErrorEvent,
    Event,
    Message,
    ModelCall,
    ModelCallStarted,
    ToolCall,
    read_trace,
)
from harness.usage import Usage, counts


@dataclass(frozen=True)
class TraceFacts:
    events: list[Event] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    last_message: str = ""
    tool_calls: list[str] = field(default_factory=list)
    env_outcomes: dict[str, dict[str, int]] = field(default_factory=dict)
    text_calls: list[str] = field(default_factory=list)
    cut_replies: int = 0
    # the last model_call_started, model_call or model error: what the agent was doing with its model
    last_model_event: ModelCallStarted | ModelCall | ErrorEvent | None = None

    def waiting_on_model(self, now: float | None = None) -> str | None:
        """Why a killed agent's row is the model's error, or None.

        Rule: the trace's last model event is a `model_call_started` (no reply, no failure after
        it) that had waited at least one request's timeout when the agent was killed: the model
        hung or kept failing. A call younger than that is a slow answer cut short by the
        wall-clock limit: a limit, not an error."""
        last = self.last_model_event
        if not isinstance(last, ModelCallStarted):
            return None
        waited = (time.time() if now is None else now) - last.at
        if last.timeout is not None and waited < last.timeout:
            return None
        return (f"model {last.model}: no reply after {waited:.0f} s; the agent was killed at the instance's "
                f"wall-clock limit while waiting (per-request timeout {last.timeout or 0:.0f} s)")


def read_facts(path: Path) -> TraceFacts:
    """The facts of the trace at `path`, from one read of it."""
    events = read_trace(path)
    usage, last_text, tools, text_calls, cut = Usage(), "", [], [], 0
    outcomes: dict[str, dict[str, int]] = {}
    last_model: ModelCallStarted | ModelCall | ErrorEvent | None = None
    for event in events:
        if isinstance(event, ModelCallStarted | ModelCall) or (isinstance(event, ErrorEvent) and event.kind == "model"):
            last_model = event
        if isinstance(event, ModelCall):
            usage += Usage(**counts(event.usage), llm_calls=1)
            if event.text_tool_call:
                text_calls.append((event.content or "").strip())
            cut += event.finish_reason == "length"
        elif isinstance(event, ToolCall):
            tools.append(event.name)
        elif isinstance(event, Message):
            last_text = event.content
        elif isinstance(event, EnvAction):
            per_env = outcomes.setdefault(event.env, {})
            per_env[event.outcome] = per_env.get(event.outcome, 0) + 1
    return TraceFacts(events=events, usage=usage, last_message=last_text, tool_calls=tools,
                      env_outcomes=outcomes, last_model_event=last_model, text_calls=text_calls,
                      cut_replies=cut)
