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
* the ``tool_call`` events after it -> that step's tool_calls (id, name, arguments), ``tool_result`` -> its
  observation (source_call_id, content; is_error in extra), ``env`` and ``tool_calls_dropped`` -> its extra;
* an agent's ``message`` repeating the step's reply names the step's agent; any other is an agent step of its own.
The ``tools`` event (the tools the agent's model was offered, OpenAI-style, as ATIF wants them) becomes the agent's
tool_definitions (a team's member -> tool names in agent.extra.tools_by_agent); a trace from before that event has
none, a warning when it made model calls.
``limit``, ``error``, ``divergence``, ``verdict``, ``judge_call`` and ``stderr`` events, and event types this
module does not know, are kept whole in the root's extra.events (unknown ones also counted in the warnings).
Timestamps come from the trace's wall clock (model_call_started's `at`); a trace without one has none.
final_metrics sums the steps' tokens (a warning and the notes say when the row counted otherwise) and takes the
row's cost (none when not priced). The root's extra holds the outcome (status, answer, target, verdict, every
scorer's score, error kind, limit), the rest of the row, and run.json. A trial without a trace, or with no step, is
a warning naming it; nothing else is left out.
"""

from __future__ import annotations

from collections import Counter
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
    """One trace read into steps (the module docstring)."""

    def __init__(self, events: list[dict[str, Any]], agent_name: str):
        self.agent_name = agent_name
        self.steps: list[Step] = []
        self.aside: list[dict[str, Any]] = []
        self.unknown: Counter[str] = Counter()
        self.prelude: list[dict[str, Any]] = []
        self.agent: Step | None = None  # the agent step the next tool events belong to
        self.tools: dict[str, Any] | None = None  # the `tools` event (None: the trace has none)
        starts = [e for e in events if e.get("type") == "model_call_started" and e.get("at")]
        self.t0 = float(starts[0]["at"]) - float(starts[0].get("t") or 0) if starts else None
        for event in events:
            self.read(event)
        self.aside += self.prelude  # a model call still waited on when the trace ended

    def when(self, t: Any) -> str | None:
        if self.t0 is None or not t:
            return None  # t = 0: appended by the parent after the agent ended
        return datetime.fromtimestamp(self.t0 + float(t), UTC).isoformat()

    def said(self, source: str, message: str, t: Any, **extra: Any) -> None:
        self.agent = None
        self.steps.append({"source": source, "message": message, "timestamp": self.when(t), "extra": extra or None})

    def read(self, e: dict[str, Any]) -> None:
        kind, text = e.get("type"), str(e.get("content") or "")
        if kind == "task":
            self.said("user", str(e.get("task") or ""), e.get("t"))
        elif kind == "system_prompt":
            self.said("system", text, e.get("t"), agent=e.get("source"))
        elif kind == "user_reply":
            self.said("user", text, e.get("t"), user_reply=e.get("number"))
        elif kind == "message" and e.get("source") == "user":
            self.said("user", text, e.get("t"))
        elif kind == "message":
            if self.agent is not None and self.agent["message"].strip() == text.strip():
                _extra(self.agent)["agent"] = e.get("source")
                return
            self.said("agent", text, e.get("t"), agent=e.get("source"), event="message")
        elif kind == "tools" and self.tools is None:
            self.tools = e
        elif kind in PRELUDE:
            self.prelude.append(e)
        elif kind == "model_call":
            self.model_call(e)
        elif kind in ("tool_call", "tool_result", "env", "tool_calls_dropped"):
            self.act(kind, e)
        else:
            self.aside.append(e)
            if kind not in ASIDE:
                self.unknown[str(kind)] += 1

    def model_call(self, e: dict[str, Any]) -> None:
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

    def act(self, kind: str, e: dict[str, Any]) -> None:
        if self.agent is None:  # a tool event with no model call before it
            self.said("agent", "", e.get("t"), event=kind)
            self.agent = self.steps[-1]
        step = self.agent
        calls = step.setdefault("tool_calls", [])
        if kind == "tool_call":
            arguments = e.get("arguments")
            call: dict[str, Any] = {"tool_call_id": str(e.get("call_id") or f"call-{len(self.steps)}-{len(calls) + 1}"),
                                    "function_name": str(e.get("name") or ""),
                                    "arguments": arguments if isinstance(arguments, dict) else {"value": arguments}}
            if e.get("source") and e.get("source") != self.agent_name:
                call["extra"] = {"agent": e.get("source")}
            calls.append(call)
        elif kind == "tool_result":
            call_id = str(e.get("call_id") or "")
            matched = any(c["tool_call_id"] == call_id for c in calls)
            extra: dict[str, Any] = {"is_error": True} if e.get("is_error") else {}
            if not matched:
                extra.update(call_id=call_id, name=e.get("name"))
            step.setdefault("observation", {"results": []})["results"].append(
                {"source_call_id": call_id if matched else None, "content": str(e.get("content") or ""),
                 "extra": extra or None})
        else:
            _extra(step).setdefault("env_actions" if kind == "env" else kind, []).append(_body(e))


def _finish(step: Step, n: int) -> Step:
    """The step as ATIF has it: numbered, its unrun reply calls in extra, nothing empty or private left."""
    unrun = step.pop("_reply_calls", [])[len(step.get("tool_calls") or []):]
    if unrun:
        _extra(step)["tool_calls_not_run"] = unrun
    if not step.get("tool_calls"):
        step.pop("tool_calls", None)
    extra = {k: v for k, v in (step.get("extra") or {}).items() if v is not None}
    return {**step, "step_id": n, "extra": extra or None}


def _final_metrics(steps: list[Step], row: ResultRow, priced: bool) -> tuple[dict[str, Any], str | None]:
    """ATIF's totals over the steps, and a note when they differ from the row's (a trace cut short)."""
    def total(key: str) -> int:
        return sum(int((s.get("metrics") or {}).get(key) or 0) for s in steps)
    sums = {"prompt_tokens": total("prompt_tokens"), "completion_tokens": total("completion_tokens"),
            "cached_tokens": total("cached_tokens")}
    counted = {"prompt_tokens": row.usage.prompt_tokens, "completion_tokens": row.usage.completion_tokens,
               "cached_tokens": row.usage.cached_prompt_tokens}
    note = None if sums == counted else (f"the steps' tokens {sums} differ from the row's {counted} "
                                         "(the row counts every model call; the trace holds fewer)")
    return {"total_prompt_tokens": sums["prompt_tokens"], "total_completion_tokens": sums["completion_tokens"],
            "total_cached_tokens": sums["cached_tokens"], "total_steps": len(steps),
            "total_cost_usd": row.usage.cost if priced else None}, note


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


def trajectory(run: ExportRun, row: ResultRow) -> tuple[dict[str, Any] | None, list[str]]:
    """The trial's ATIF document, checked (None when it has none), and its warnings."""
    name = f"{row.instance_id} (epoch {row.epoch})"
    events = run.trace(row)
    if not events:
        return None, [f"{name}: no trace ({row.trace or 'the row names none'}): no trajectory written"]
    config = run.figures.run
    walk = _Walk(events, str(config.get("agent") or ""))
    ordered = [s for s in walk.steps if s["source"] == "system"] + [s for s in walk.steps if s["source"] != "system"]
    steps = [_finish(s, n) for n, s in enumerate(ordered, 1)]
    if not steps:
        return None, [f"{name}: its trace has no step ATIF holds (ATIF needs one): no trajectory written"]
    warnings = [f"{name}: {n} trace event(s) of type {kind!r}, unknown to the ATIF export, kept in extra.events"
                for kind, n in walk.unknown.items()]
    final_metrics, note = _final_metrics(steps, row, run.figures.report.priced)
    if note:
        warnings.append(f"{name}: {note}")
    agent, found = _agent(walk.tools, config, any("metrics" in s for s in steps))
    warnings += [f"{name}: {w}" for w in found]
    fields = row.model_dump(mode="json")
    doc = {"schema_version": SCHEMA_VERSION, "session_id": f"{run.figures.root.name}/{Path(str(row.trace)).stem}",
           "agent": agent,
           "steps": steps, "notes": note, "final_metrics": final_metrics,
           "extra": {"outcome": {k: fields.pop(k) for k in OUTCOME}, "trial": fields, "events": walk.aside,
                     "run": config}}
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
