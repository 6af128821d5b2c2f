"""Per-instance trace: one JSON line per event, in the harness's own event types.

Runners (AutoGen or not) and environments write these; salvage after a kill, reports
and recordings read them, and never parse a framework's message dumps. Each line is
flushed as it is written, so a killed agent still leaves its trace.

    task          the instruction the agent was given
    system_prompt an agent's system message
    tools         the tools the agent's model(s) are offered, once, as the runner has set the agent up: each an
                  OpenAI-style definition {type: function, function: {name, description, parameters}} as the
                  model is sent it; `agents`, of a team: which member holds which (absent from older traces);
                  `members`, of a team: its members by name, in order (absent from older traces)
    message       text an agent (or the simulated user) said
    tool_call     an agent asked for a tool: name, arguments, call id
    tool_result   what the tool answered (is_error when it failed)
    model_call_started  a model call went out: its model, per-request timeout and wall-clock start
                  (a start with no model_call or error after it was still waiting when the trace ended);
                  this, model_call and model_wait carry `agent` when a team's member or manager, or one of
                  Gaia2's app agents, made the call (its name), and `via`, of an app agent, the tool whose call
                  it runs in (`acting`; absent from older traces and from a lone agent's calls)
    model_call    one model call: seconds, usage, the reply (content or tool calls), and the request:
                  n_messages (how many it sent) and messages, only those whose text the trace does
                  not hold yet (role, content, source/call_id); `cached` when --cache answered it
                  (harness/models/cache.py); response_model, fingerprint and sampling: the reply's model id,
                  its system_fingerprint and the request's sampling as sent; a message already written (the
                  system prompt, the task, a tool result, an earlier reply) is not repeated, so a
                  trace grows linearly with the conversation, not quadratically
    model_wait    inside a model call: a 429/503 answer waited out before the call tried again (its
                  status, what it asked, e.g. "Retry-After: 70", the seconds waited, the retry's number;
                  harness/models/pacing.py)
    tool_calls_dropped  a model reply asked for more tool calls than run (HARNESS_MAX_TOOL_CALLS_PER_REPLY):
                  its model, how many it asked for, how many ran (the first ones) and were dropped;
                  the dropped calls are in the model_call's tool_calls, never in tool_call events
    env           one environment action (code / file / web): args, outcome, timing
    user_reply    the simulated user's answer to an agent that stopped without <solution>
    limit         a budget stopped the agent; the parent appends one with detail
                  "killed at --instance-timeout N s" when it kills the agent at the wall-clock limit
                  (" while waiting on the model ..." added when that kill makes the row a model error)
    error         an error, its kind and traceback
    divergence    appended by the parent after a replayed instance: a tool result that differs from
                  the recording's fingerprint of it (harness/models/replay.py has the rule): the
                  model call it answered, the tool, both fingerprints, what differs, an excerpt
    verdict       appended by the parent once the row is scored (by `harness run`; a `harness score`
                  rescore appends another, source "rescore": the last verdict is the current one):
                  status, answer, answer_source, target, correct, and every scorer's Score
                  (verdict, explanation, details: what it compared)

Duplicates: `model_call.messages` never repeats a text the trace holds (it keeps a set of the
texts written). Two overlaps are kept on purpose: a `message` is what an agent said, with its
source (salvage reads it), while `model_call.content` is the raw reply (what --record replays), so
an agent's plain text turn appears in both; and AutoGen's tool-call summary messages (a `message`
whose text is the tool results) repeat `tool_result` contents, as AutoGen emits them as turns.
Events the parent appends after the agent process ended (`limit` on a kill, `verdict`) have t = 0.
"""

from __future__ import annotations

import errno
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from harness.text import scrub

# Who makes the model calls of the current task when it is not the agent itself: {"agent": a team's member or
# manager, or an app agent} and, of an app agent, {"via": the tool whose call it runs in}. The meter writes it into
# the call's model_call_started, model_wait and model_call events; the ATIF export makes sub-trajectories of them.
ACTING: ContextVar[dict[str, str] | None] = ContextVar("harness_acting", default=None)


@contextmanager
def acting(agent: str | None, via: str | None = None) -> Iterator[None]:
    """The model calls made inside are `agent`'s (nothing when None)."""
    token = ACTING.set(None if agent is None else {"agent": agent, **({"via": via} if via else {})})
    try:
        yield
    finally:
        ACTING.reset(token)


def actor() -> dict[str, Any]:
    """The fields the current model call's events carry: ACTING's, or none."""
    return dict(ACTING.get() or {})


class _Event(BaseModel):
    # Built when first used (a trace written or read), not when imported: most harness commands never do.
    model_config = ConfigDict(extra="allow", defer_build=True)
    t: float = 0.0  # seconds since the tracer opened


class TaskEvent(_Event):
    type: Literal["task"] = "task"
    task: str


class SystemPrompt(_Event):
    type: Literal["system_prompt"] = "system_prompt"
    source: str
    content: str


class ToolsOffered(_Event):
    type: Literal["tools"] = "tools"
    tools: list[dict[str, Any]] = Field(default_factory=list)  # OpenAI-style definitions, one per tool name
    agents: dict[str, list[str]] | None = None  # of a team: member -> the names of the tools it holds
    members: list[str] | None = None  # of a team: its members' names, in order


class Message(_Event):
    type: Literal["message"] = "message"
    source: str
    content: str


class ToolCall(_Event):
    type: Literal["tool_call"] = "tool_call"
    source: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str = ""


class ToolResult(_Event):
    type: Literal["tool_result"] = "tool_result"
    name: str
    call_id: str = ""
    content: str = ""
    is_error: bool = False


class ModelCallStarted(_Event):
    type: Literal["model_call_started"] = "model_call_started"
    model: str = ""
    timeout: float | None = None  # seconds the client gives one request
    at: float = 0.0  # wall-clock start (time.time()), for whoever reads the trace of a killed process


class ModelAttempt(_Event):
    """A model call's request sent again (the client's own retry: a timeout, a dropped connection, a 5xx)."""

    type: Literal["model_attempt"] = "model_attempt"
    model: str = ""
    attempt: int = 2  # 2: the first retry
    at: float = 0.0  # wall-clock (time.time())


class ModelCall(_Event):
    type: Literal["model_call"] = "model_call"
    model: str = ""
    seconds: float = 0.0
    usage: dict[str, int] = Field(default_factory=dict)  # prompt_tokens, completion_tokens
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    n_messages: int | None = None  # how many messages the request sent (None: not recorded)
    messages: list[dict[str, Any]] = Field(default_factory=list)  # those new to this trace (see above)
    cached: bool = False  # answered by --cache (harness/models/cache.py), not the provider
    # the offered tool the reply's text calls when its content is nothing but a tool call written as text
    # (harness/models/textcalls.py: a server without its tool-call parser); None: not one
    text_tool_call: str | None = None
    # why the reply ended, as the provider said ("stop", "tool_calls", "length": cut at the server's or the
    # section's token cap); None: not said (a replayed turn recorded without it)
    finish_reason: str | None = None
    # what makes two calls comparable (harness/models/tap.py): the model id the reply names (an alias's current
    # target), the provider's build of it (OpenAI's system_fingerprint) and the sampling the request sent
    # (temperature, top_p, seed, max_tokens, ... as on the wire); None: not read (a replayed or cached reply)
    response_model: str | None = None
    fingerprint: str | None = None
    sampling: dict[str, Any] | None = None


class ModelWait(_Event):
    type: Literal["model_wait"] = "model_wait"
    model: str = ""
    status: int = 0  # 429 or 503
    asked: str = ""  # the header as sent ("" when it asked for no wait: the backoff's)
    seconds: float = 0.0  # waited before the retry
    retry: int = 1  # which retry of the call follows


class ToolCallsDropped(_Event):
    type: Literal["tool_calls_dropped"] = "tool_calls_dropped"
    model: str = ""
    asked: int  # tool calls in the reply
    kept: int  # the first ones: these ran
    dropped: int
    limit: str = ""  # the setting and its value


class EnvAction(_Event):
    type: Literal["env"] = "env"
    env: str
    action: str
    args: dict[str, Any] = Field(default_factory=dict)
    outcome: str = "ok"  # ok / nonzero_exit (code env) / timeout / crashed / error
    seconds: float = 0.0


class UserReply(_Event):
    type: Literal["user_reply"] = "user_reply"
    number: int
    content: str


class LimitEvent(_Event):
    type: Literal["limit"] = "limit"
    limit: str
    detail: str = ""


class VerdictEvent(_Event):
    type: Literal["verdict"] = "verdict"
    source: str = "run"  # run / rescore
    status: str = ""
    answer: str | None = None
    answer_source: str = "none"
    target: str | None = None
    correct: bool | None = None
    scores: dict[str, dict[str, Any]] = Field(default_factory=dict)  # scorer name -> Score fields


class Stderr(_Event):
    """What an agent program in the sandbox wrote to its stderr, run by run (agents/sandboxed/runner.py): its
    debugging channel, kept whatever its exit code; the end of it when it is long."""

    type: Literal["stderr"] = "stderr"
    source: str = ""
    exit_code: int | None = None
    content: str = ""
    omitted: int = 0  # characters cut from its start


class JudgeCall(_Event):
    """One call of a judge model (issue 41): the LLM judge scorer's, appended by the parent before the verdict
    (runner/appends.py), or the judge of a benchmark that judges in its sandbox (Gaia2's, as it is made)."""

    type: Literal["judge_call"] = "judge_call"
    judge: str = ""  # the scorer (llm_judge, llm_judge@0.5) or the benchmark's judge (gaia2)
    model: str = ""  # the judge's model section, when known
    messages: list[dict[str, Any]] = Field(default_factory=list)  # what the judge was sent
    reply: str = ""  # what it answered
    error: str = ""  # the call's error, when it failed
    response_model: str = ""  # the model id the reply named (an alias re-pointed shows here: report/calls.py)
    fingerprint: str = ""  # the reply's system_fingerprint, where the provider gives one


class Divergence(_Event):
    type: Literal["divergence"] = "divergence"
    turn: int  # the model call (1-based) whose tool call this result answered
    name: str  # the tool
    call_id: str = ""
    recorded: dict[str, Any] = Field(default_factory=dict)  # the recording's fingerprint {status, hash}
    replayed: dict[str, Any] = Field(default_factory=dict)  # this run's
    what: str = ""  # which way it differs (harness/models/replay.py DIVERGES)
    excerpt: str = ""  # the start of this run's result


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    kind: str
    message: str = ""
    traceback: str = ""


Event = Annotated[TaskEvent | SystemPrompt | ToolsOffered | Message | ToolCall | ToolResult | ModelCallStarted
                  | ModelCall | ModelAttempt | ModelWait | ToolCallsDropped | EnvAction | UserReply | LimitEvent
                  | ErrorEvent | VerdictEvent | Divergence | JudgeCall | Stderr,
                  Field(discriminator="type")]
_EVENT: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(defer_build=True))


def build_schemas() -> None:
    """Build every event's schema now instead of at its first use: the agents' fork server calls this before it
    forks, so that no agent process builds them again (~5 ms of CPU each)."""
    for cls in _Event.__subclasses__():
        cls.model_rebuild()
    _EVENT.rebuild()


class Tracer:
    """Writes one trace. A write the file refuses (a full disk) never reaches the agent: the tracer
    remembers it in `failed` and writes no more (a torn last line is skipped by readers); the agent's
    process then reports the attempt as the harness's failure (harness/runner/agent_process/child.py)."""

    def __init__(self, path: Path | None):
        self.path = path
        self._lock = threading.Lock()
        self.failed: OSError | None = None  # the first write the trace file refused
        try:
            self._fh = open(path, "ab", buffering=0) if path else None
        except OSError as exc:
            self._fh, self.failed = None, exc
        self._t0 = time.monotonic()
        self.tool_calls: list[str] = []  # names, in call order: the row's tool_calls
        self._seen: set[int] = set()  # hashes of the texts written so far (model_call.messages skips them)

    def new_text(self, text: str | None) -> bool:
        """True the first time a text is offered (or written in an event); an empty text is never new."""
        if not text:
            return False
        key = hash(text)
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
            return True

    def emit(self, event: _Event) -> None:
        if isinstance(event, ToolCall):
            self.tool_calls.append(event.name)
        text = getattr(event, "task", None) if isinstance(event, TaskEvent) else getattr(event, "content", None)
        if isinstance(text, str):
            self.new_text(text)
        if self._fh is None:
            return
        event.t = round(time.monotonic() - self._t0, 4)
        data = (_line(event) + "\n").encode()
        with self._lock:
            if self._fh is None:
                return
            try:
                written = self._fh.write(data)  # unbuffered: one write per line
                if written != len(data):
                    raise OSError(errno.ENOSPC, f"short write to {self.path}: {written} of {len(data)} bytes")
            except OSError as exc:
                self.failed = exc
                self._fh.close()
                self._fh = None

    def close(self) -> None:
        with self._lock:
            if self._fh:
                self._fh.close()
                self._fh = None


def append_event(path: Path, event: _Event) -> None:
    """Append one event to a closed trace (the parent's `limit` and `verdict`); t is left 0."""
    torn = path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(("\n" if torn else "") + _line(event) + "\n")


def _line(event: _Event) -> str:
    """The event as one JSON line (ASCII: json.dumps escapes the rest), a lone surrogate in its text
    (a model's or a tool's) replaced by U+FFFD (harness/text.py), so every reader can write it out again."""
    data = event.model_dump(mode="json")
    line = json.dumps(data, default=str)
    return json.dumps(scrub(data), default=str) if "\\ud" in line else line


def read_events(path: Path) -> list[dict[str, Any]]:
    """A trace file's lines that are JSON objects, as written (event types another version of the
    harness writes are kept: the run pages show them); a torn line (a killed process) is skipped.
    A missing or unreadable file has none."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    events: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line of a killed process (the parent may have appended after it)
        if isinstance(raw, dict):
            events.append(raw)
    return events


def read_trace(path: Path) -> list[Event]:
    """The events of a trace file (read_events) in the harness's event types; unknown lines are skipped."""
    events: list[Event] = []
    for raw in read_events(path):
        try:
            events.append(_EVENT.validate_python(raw))
        except ValidationError:
            continue
    return events
