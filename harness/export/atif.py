"""`harness export DIR --format atif --out FOLDER`: each trial as an ATIF trajectory (ATIF-v1.8, Harbor's
Agent Trajectory Interchange Format, RFC 0001; docs/results.md#atif says how it was checked).

ATIF has no bundle: a document is one trajectory, and Harbor keeps each trial's at TRIAL/agent/trajectory.json.
So one file per trial (a selected (instance, epoch) with a row), at FOLDER/<its trace's name>/agent/trajectory.json.
Each document is built and checked with the `atif` package's pydantic models before anything is written.

A trace (harness/traces) becomes steps, in its order, the system prompts first (as export/transcript.py):
* ``system_prompt`` -> a ``system`` step; ``task``, ``user_reply`` and a ``message`` of the user -> ``user`` steps;
* ``model_call`` -> an ``agent`` step: its model, its reply text (message), its usage (metrics: prompt, completion
  and cached tokens; cache-write and reasoning tokens in metrics.extra), and in extra its seconds, a --cache hit,
  the request's messages the trace held nowhere else, the ``model_call_started``/``model_attempt``/``model_wait``
  events before it, and the reply's tool calls that never ran (beyond HARNESS_MAX_TOOL_CALLS_PER_REPLY);
* the ``tool_call`` events after it -> that step's tool_calls (id, name, arguments), ``tool_result`` -> the
  observation of the step that made the call (source_call_id, content; is_error in extra), ``env`` and
  ``tool_calls_dropped`` -> its extra;
* an agent's ``message`` repeating the step's reply names the step's agent; any other is an agent step of its own.
Sub-agents: the events of a team's member (the tools event's ``members``; a model call's ``agent``, a message's or
tool call's ``source``) and of an app agent (a model call's ``agent`` with ``via``) become that sub-agent's steps,
an embedded trajectory of its own in the root's subagent_trajectories; the root links it where it hands work over
(``_Link``): a member's turn is a root step of its own, an app agent's run the result of the tool call it ran in.
The ``tools`` event (the tools the agent's model was offered, OpenAI-style, as ATIF wants them) becomes the agent's
tool_definitions (a team's member -> tool names in agent.extra.tools_by_agent); a trace from before that event has
none, a warning when it made model calls.
``limit``, ``error``, ``divergence``, ``verdict``, ``judge_call`` and ``stderr`` events, and event types this
module does not know, are kept whole in the root's extra.events (unknown ones also counted in the warnings).
Timestamps come from the trace's wall clock (model_call_started's `at`); a trace without one has none.
final_metrics sums every step's tokens, the sub-agents' too (a warning and the notes say when the row counted
otherwise), counts the root's steps and takes the row's cost (none when not priced). The root's extra holds the
outcome (status, answer, target, verdict, every scorer's score, error kind, limit), the rest of the row, and
run.json. A trial without a trace, or with no step, is a warning naming it; nothing else is left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import atif
from pydantic import ValidationError

from harness import __version__
from harness.export.source import ExportRun
from harness.fsutil import slug
from harness.results.model import ResultRow

SCHEMA_VERSION = "ATIF-v1.8"
OUTCOME = ("status", "answer", "answer_source", "target", "correct", "unscored", "scores", "error_kind", "error",
           "limit")
ASIDE = ("limit", "error", "divergence", "verdict", "judge_call", "stderr")  # kept whole in the root's extra.events
PRELUDE = ("model_call_started", "model_attempt", "model_wait")  # extra of the model call they precede
Step = dict[str, Any]


def _body(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in ("type", "t")}


def _extra(step: Step) -> dict[str, Any]:
    if step.get("extra") is None:
        step["extra"] = {}
    return step["extra"]


class _Walk:
    """One agent's steps: the trial's own (the root's), or a sub-agent's (a team's member, an app agent)."""

    def __init__(self, name: str, when: Callable[[Any], str | None]):
        self.name, self.when = name, when
        self.steps: list[Step] = []
        self.prelude: list[dict[str, Any]] = []
        self.agent: Step | None = None  # the agent step the next tool events belong to

    def said(self, source: str, message: str, t: Any, **extra: Any) -> Step:
        self.agent = None
        self.steps.append({"source": source, "message": message, "timestamp": self.when(t), "extra": extra or None})
        return self.steps[-1]

    def message(self, e: dict[str, Any]) -> Step | None:
        """An agent's message: a new step, or None when it repeats the current step's reply (it names its agent)."""
        text = str(e.get("content") or "")
        if self.agent is not None and self.agent["message"].strip() == text.strip():
            if e.get("source") != self.name:
                _extra(self.agent)["agent"] = e.get("source")
            return None
        return self.said("agent", text, e.get("t"), agent=e.get("source"), event="message")

    def model_call(self, e: dict[str, Any]) -> Step:
        usage = e.get("usage") or {}
        started = next((p for p in self.prelude if p.get("type") == "model_call_started"), None)
        details = {k: usage[k] for k in ("cache_write_tokens", "reasoning_tokens") if usage.get(k)}
        extra: dict[str, Any] = {"seconds": e.get("seconds"), "n_messages": e.get("n_messages")}
        extra.update({k: v for k, v in (("response_cache_hit", e.get("cached") or None),
                                        ("request_messages", e.get("messages") or None),
                                        ("text_tool_call", e.get("text_tool_call"))) if v is not None})
        for kind in PRELUDE:
            if found := [_body(p) for p in self.prelude if p.get("type") == kind]:
                extra[kind] = found
        self.prelude = []
        self.agent = {"source": "agent", "message": str(e.get("content") or ""), "model_name": e.get("model") or None,
                      "timestamp": (datetime.fromtimestamp(float(started["at"]), UTC).isoformat() if started
                                    else self.when(e.get("t"))),
                      "metrics": {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                                  "completion_tokens": int(usage.get("completion_tokens") or 0),
                                  "cached_tokens": usage.get("cached_prompt_tokens") or None,
                                  "extra": details or None},
                      "extra": extra, "_reply_calls": e.get("tool_calls") or []}
        self.steps.append(self.agent)
        return self.agent

    def act(self, kind: str, e: dict[str, Any]) -> dict[str, Any] | None:
        """A tool event into the current agent step (one of its own when there is none); a tool result's entry
        returned."""
        call_id = str(e.get("call_id") or "")
        asked = next((s for s in reversed(self.steps) if kind == "tool_result" and call_id
                      and any(c["tool_call_id"] == call_id for c in s.get("tool_calls") or [])), None)
        if asked is None and self.agent is None:  # a tool event with no model call before it
            self.agent = self.said("agent", "", e.get("t"), event=kind)
        step = asked or self.agent
        assert step is not None
        calls = step.setdefault("tool_calls", [])
        if kind == "tool_call":
            arguments = e.get("arguments")
            call: dict[str, Any] = {"tool_call_id": str(e.get("call_id") or f"call-{len(self.steps)}-{len(calls) + 1}"),
                                    "function_name": str(e.get("name") or ""),
                                    "arguments": arguments if isinstance(arguments, dict) else {"value": arguments}}
            if e.get("source") and e.get("source") != self.name:
                call["extra"] = {"agent": e.get("source")}
            calls.append(call)
        elif kind == "tool_result":
            matched = any(c["tool_call_id"] == call_id for c in calls)
            extra: dict[str, Any] = {"is_error": True} if e.get("is_error") else {}
            if not matched:
                extra.update(call_id=call_id, name=e.get("name"))
            result = {"source_call_id": call_id if matched else None, "content": str(e.get("content") or ""),
                      "extra": extra or None}
            step.setdefault("observation", {"results": []})["results"].append(result)
            return result
        else:
            _extra(step).setdefault("env_actions" if kind == "env" else kind, []).append(_body(e))
        return None

    def numbered(self) -> list[Step]:
        """The steps, system prompts first, each given its step_id (the sub-agents' links name them)."""
        ordered = sorted(self.steps, key=lambda s: s["source"] != "system")  # stable: the trace's order kept
        for n, step in enumerate(ordered, 1):
            step["step_id"] = n
        return ordered


class _Link:
    """Where the trial hands work to a sub-agent: a team member's turn (a root step of its own) or an app agent's
    run inside a tool call (that call's result). Its ref names the sub-agent's steps it covers."""

    def __init__(self, name: str):
        self.name = name
        self.steps: list[Step] = []
        self.said: str | None = None  # a team member's last message in its turn

    def ref(self) -> list[dict[str, Any]]:
        ids = [s["step_id"] for s in self.steps]
        return [{"trajectory_id": self.name,
                 "extra": {"first_step_id": min(ids), "last_step_id": max(ids)} if ids else None}]


class _Trace:
    """One trace read into the root's steps and its sub-agents' (the module docstring)."""

    def __init__(self, events: list[dict[str, Any]], agent_name: str):
        starts = [e for e in events if e.get("type") == "model_call_started" and e.get("at")]
        self.t0 = float(starts[0]["at"]) - float(starts[0].get("t") or 0) if starts else None
        self.tools = next((e for e in events if e.get("type") == "tools"), None)  # None: the trace has none
        self.members = set((self.tools or {}).get("members") or [])  # a team's (none in a trace from before them)
        self.root = _Walk(agent_name, self.when)
        self.subs: dict[str, _Walk] = {}
        self.roles: dict[str, dict[str, Any]] = {}  # a sub-agent's: team member or app agent (and its tool)
        self.aside: list[dict[str, Any]] = []
        self.unknown: Counter[str] = Counter()
        self.calls: dict[str, _Walk] = {}  # a tool call's id -> the walk that made it
        self.open: dict[str, str] = {}  # tool calls not answered yet: id -> tool name
        self.runs: dict[str, _Link] = {}  # an open tool call's id -> the app agent's run inside it
        self.turn: _Link | None = None  # the team member whose turn the root's latest step is
        self.turns: list[tuple[Step, _Link]] = []  # the root's turn steps
        self.latest: dict[str, _Link] = {}  # a member's latest turn
        self.answered: list[tuple[dict[str, Any], _Link]] = []  # tool results an app agent's run is linked from
        self.last_call = self.last_model = self.root  # the walks of the latest tool call and model call
        for event in events:
            self.read(event)
        for walk in (self.root, *self.subs.values()):
            self.aside += walk.prelude  # a model call still waited on when the trace ended

    def when(self, t: Any) -> str | None:
        if self.t0 is None or not t:
            return None  # t = 0: appended by the parent after the agent ended
        return datetime.fromtimestamp(self.t0 + float(t), UTC).isoformat()

    def who(self, e: dict[str, Any]) -> _Walk:
        """The walk an agent's event belongs to: a team member's or an app agent's, else the root's."""
        name = str(e.get("agent") or e.get("source") or "")
        role = {"role": "app agent", "via": e["via"]} if e.get("via") and e.get("agent") else (
            {"role": "team member"} if name in self.members else None)
        if role is None:
            return self.root
        if name not in self.subs:
            self.subs[name], self.roles[name] = _Walk(name, self.when), role
        return self.subs[name]

    def stepped(self, walk: _Walk, e: dict[str, Any], step: Step | None) -> None:
        """A new step of `walk`'s; a sub-agent's is linked from the root: from the open tool call it runs in (an
        app agent's), else from a root step of the member's turn."""
        if step is None:
            return
        if walk is self.root:
            self.turn = None
            return
        via = e.get("via")
        run = next((i for i, tool in reversed(self.open.items()) if via and tool == via), None)
        if run is not None:
            self.runs.setdefault(run, _Link(walk.name)).steps.append(step)
            return
        if self.turn is None or self.turn.name != walk.name:
            self.turn, self.root.agent = _Link(walk.name), None
            self.root.steps.append({"source": "agent", "message": "", "timestamp": step.get("timestamp"),
                                    "llm_call_count": 0, "extra": {"agent": walk.name, "event": (
                                        "turn" if self.roles[walk.name]["role"] == "team member" else "run")}})
            self.turns.append((self.root.steps[-1], self.turn))
            self.latest[walk.name] = self.turn
        self.turn.steps.append(step)

    def read(self, e: dict[str, Any]) -> None:
        kind, text, root = e.get("type"), str(e.get("content") or ""), self.root
        if kind == "task":
            self.stepped(root, e, root.said("user", str(e.get("task") or ""), e.get("t")))
        elif kind == "system_prompt":
            walk = self.who(e)
            walk.said("system", text, e.get("t"), **({"agent": e.get("source")} if walk is root else {}))
        elif kind == "user_reply":
            self.stepped(root, e, root.said("user", text, e.get("t"), user_reply=e.get("number")))
        elif kind == "message" and e.get("source") == "user":
            self.stepped(root, e, root.said("user", text, e.get("t")))
        elif kind == "message":
            walk = self.who(e)
            self.stepped(walk, e, walk.message(e))
            if (turn := self.latest.get(walk.name)) is not None:  # its message may come after others' calls
                turn.said = text
        elif kind in PRELUDE:
            self.who(e).prelude.append(e)
        elif kind == "model_call":
            walk = self.last_model = self.who(e)
            self.stepped(walk, e, walk.model_call(e))
        elif kind == "tool_call":
            walk = self.last_call = self.who(e)
            fresh = walk.agent is None
            walk.act(kind, e)
            self.stepped(walk, e, walk.agent if fresh else None)
            call_id = str(e.get("call_id") or "")
            self.calls[call_id], self.open[call_id] = walk, str(e.get("name") or "")
        elif kind == "tool_result":
            call_id = str(e.get("call_id") or "")
            result = self.calls.get(call_id, self.last_call).act(kind, e)
            self.open.pop(call_id, None)
            if (run := self.runs.pop(call_id, None)) is not None and result is not None:
                self.answered.append((result, run))
        elif kind in ("env", "tool_calls_dropped"):
            (self.last_call if kind == "env" else self.last_model).act(kind, e)
        elif kind != "tools":
            self.aside.append(e)
            if kind not in ASIDE:
                self.unknown[str(kind)] += 1

    def link(self) -> None:
        """The sub-agents' refs written where the root hands them work (once every walk is numbered); an app
        agent's run in a tool call never answered gets a root step of its own."""
        for result, run in self.answered:
            result["subagent_trajectory_ref"] = run.ref()
        for step, turn in self.turns:
            step["message"] = turn.said or ""  # what the member said to the team in its turn
            step["observation"] = {"results": [{"subagent_trajectory_ref": turn.ref()}]}

    def unanswered(self) -> None:
        """An app agent's run in a tool call never answered: a root step of its own links it."""
        for run in self.runs.values():
            self.root.steps.append({"source": "agent", "message": "", "llm_call_count": 0,
                                    "extra": {"agent": run.name, "event": "tool call never answered"}})
            self.turns.append((self.root.steps[-1], run))


def _finish(step: Step) -> Step:
    """The step as ATIF has it: its unrun reply calls in extra, nothing empty or private left."""
    unrun = step.pop("_reply_calls", [])[len(step.get("tool_calls") or []):]
    if unrun:
        _extra(step)["tool_calls_not_run"] = unrun
    if not step.get("tool_calls"):
        step.pop("tool_calls", None)
    extra = {k: v for k, v in (step.get("extra") or {}).items() if v is not None}
    return {**step, "extra": extra or None}


def _sums(steps: list[Step]) -> dict[str, int]:
    return {key: sum(int((s.get("metrics") or {}).get(key) or 0) for s in steps)
            for key in ("prompt_tokens", "completion_tokens", "cached_tokens")}


def _totals(sums: dict[str, int], steps: int, cost: float | None = None) -> dict[str, Any]:
    return {"total_prompt_tokens": sums["prompt_tokens"], "total_completion_tokens": sums["completion_tokens"],
            "total_cached_tokens": sums["cached_tokens"], "total_steps": steps, "total_cost_usd": cost}


def _final_metrics(steps: list[Step], every: list[Step], row: ResultRow, priced: bool) -> tuple[dict[str, Any],
                                                                                                 str | None]:
    """ATIF's totals of the trial: the tokens of `every` step (its sub-agents' too), the root's step count, the
    row's cost; and a note when the tokens differ from the row's (a trace cut short)."""
    sums = _sums(every)
    counted = {"prompt_tokens": row.usage.prompt_tokens, "completion_tokens": row.usage.completion_tokens,
               "cached_tokens": row.usage.cached_prompt_tokens}
    note = None if sums == counted else (f"the steps' tokens {sums} differ from the row's {counted} "
                                         "(the row counts every model call; the trace holds fewer)")
    totals = _totals(sums, len(steps), row.usage.cost if priced else None)
    if len(every) > len(steps):
        totals["extra"] = {"includes_subagents": True}
    return totals, note


def _agent(tools: dict[str, Any] | None, config: dict[str, Any], called: bool) -> tuple[dict[str, Any], list[str]]:
    """ATIF's agent: the run's agent and model, the tools its trace says it was offered; a warning when the trace
    of an agent that called a model does not say."""
    extra: dict[str, Any] = {"framework": "harness"}
    agent = {"name": str(config.get("agent") or "harness"), "version": __version__,
             "model_name": config.get("model"), "extra": extra}
    if tools is None:
        return agent, (["its trace does not record the tools the agent was offered (written before the harness "
                        "traced them): agent.tool_definitions left out"] if called else [])
    agent["tool_definitions"] = list(tools.get("tools") or [])
    if tools.get("agents"):
        extra["tools_by_agent"] = tools["agents"]
    return agent, []


def _subagent(trace: _Trace, name: str, steps: list[Step], config: dict[str, Any], session: str) -> dict[str, Any]:
    """A sub-agent's embedded trajectory: its steps, its tools (a team member's, as the tools event has them),
    its role in extra, its own totals."""
    tools = trace.tools or {}
    held = set(((tools.get("agents") or {}).get(name)) or [])
    agent: dict[str, Any] = {"name": name, "version": __version__, "model_name": config.get("model"),
                             "extra": {"framework": "harness", "team": config.get("agent"), **trace.roles[name]}}
    if held:
        agent["tool_definitions"] = [d for d in tools.get("tools") or [] if d.get("function", {}).get("name") in held]
    return {"schema_version": SCHEMA_VERSION, "session_id": session, "trajectory_id": name, "agent": agent,
            "steps": steps, "final_metrics": _totals(_sums(steps), len(steps))}


def trajectory(run: ExportRun, row: ResultRow) -> tuple[dict[str, Any] | None, list[str]]:
    """The trial's ATIF document, checked (None when it has none), and its warnings."""
    name = f"{row.instance_id} (epoch {row.epoch})"
    events = run.trace(row)
    if not events:
        return None, [f"{name}: no trace ({row.trace or 'the row names none'}): no trajectory written"]
    config = run.figures.run
    trace = _Trace(events, str(config.get("agent") or ""))
    trace.unanswered()
    ordered = {walk.name: walk.numbered() for walk in trace.subs.values()}
    root = trace.root.numbered()
    trace.link()
    steps = [_finish(s) for s in root]
    if not steps:
        return None, [f"{name}: its trace has no step ATIF holds (ATIF needs one): no trajectory written"]
    subs = {sub: [_finish(s) for s in found] for sub, found in ordered.items() if found}
    warnings = [f"{name}: {n} trace event(s) of type {kind!r}, unknown to the ATIF export, kept in extra.events"
                for kind, n in trace.unknown.items()]
    final_metrics, note = _final_metrics(steps, steps + [s for found in subs.values() for s in found], row,
                                         run.figures.report.priced)
    if note:
        warnings.append(f"{name}: {note}")
    agent, found = _agent(trace.tools, config, any("metrics" in s for s in steps) or bool(subs))
    warnings += [f"{name}: {w}" for w in found]
    fields = row.model_dump(mode="json")
    session = f"{run.figures.root.name}/{Path(str(row.trace)).stem}"
    doc = {"schema_version": SCHEMA_VERSION, "session_id": session, "agent": agent,
           "steps": steps, "notes": note, "final_metrics": final_metrics,
           "extra": {"outcome": {k: fields.pop(k) for k in OUTCOME}, "trial": fields, "events": trace.aside,
                     "run": config},
           "subagent_trajectories": [_subagent(trace, sub, found, config, session)
                                     for sub, found in subs.items()] or None}
    try:
        return atif.Trajectory.model_validate(doc).to_json_dict(), warnings
    except ValidationError as exc:
        return None, [*warnings, f"{name}: not a valid ATIF trajectory ({exc.errors()[0]['msg']}): none written"]


def render(run: ExportRun) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each trial's document by its path under the folder, and the warnings (trials without one named)."""
    files: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    never = [f"{iid} (epoch {e})" for iid in run.figures.ids for e in range(1, run.figures.epochs + 1)
             if (iid, e) not in run.latest]
    if never:
        warnings.append(f"{len(never)} selected trial(s) never ran, no trajectory: {', '.join(never)}")
    for iid in run.figures.ids:
        for epoch in range(1, run.figures.epochs + 1):
            if (row := run.latest.get((iid, epoch))) is None:
                continue
            doc, found = trajectory(run, row)
            warnings += found
            if doc is not None:
                files[f"{_folder(row, files)}/agent/trajectory.json"] = doc
    return files, warnings


def _folder(row: ResultRow, taken: dict[str, Any]) -> str:
    """The trial's folder: its trace's name kept to file-safe characters (a row's `trace` is data: `...jsonl`'s
    stem is `..`), and made unique."""
    base = slug(Path(str(row.trace)).stem, 120)
    name, n = base, 1
    while f"{name}/agent/trajectory.json" in taken:
        n += 1
        name = f"{base}-{n}"
    return name
