"""`harness export DIR --format inspect`: the run as an Inspect AI eval log, its JSON log format
(version 2: `inspect_ai.log.read_eval_log` reads it back and `inspect view` shows it).

Written here as plain JSON, not with inspect_ai's own types: the export then needs nothing
beyond the harness (inspect-ai is a large package, in the dev extra only, to read the file back
in tests/test_export.py, which fails when a field this module writes stops matching the schema).

The log: `eval` (task = the dataset's name, the model and agent of run.json, its epochs, reducers
and limits, run.json whole under metadata), `results` (per scorer of report.json: accuracy, its 95%
CI and how many were scored; the headline first), `stats` (first start, last finish, the
model's usage) and one sample per selected (instance, epoch) with a row: input (the question of
questions.json), target, messages (the trace's conversation, export/transcript.py), output (the
answer), scores (each scorer that reached a verdict: value, answer, explanation; `correct` in its
metadata), model usage, timing, the row's error (status error) or limit, and the level, status and
tool calls in metadata. Ids never run are not samples (`results.total_samples` counts them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.export import transcript
from harness.export.source import ExportRun
from harness.report.build import ScorerStats
from harness.results.model import ResultRow

LIMITS = {"wall_time": "time", "max_steps": "message", "max_tokens": "token"}  # harness -> Inspect limit types


def _usage(rows: list[ResultRow], priced: bool) -> dict[str, Any]:
    """Inspect's ModelUsage of `rows`; its total_cost None when the model is not priced (never $0)."""
    prompt = sum(r.usage.prompt_tokens for r in rows)
    completion = sum(r.usage.completion_tokens for r in rows)
    return {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion,
            "total_cost": sum(r.usage.cost for r in rows) if priced else None}


def _message(message: transcript.Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message["role"], "content": message["content"]}
    if message["role"] == "assistant":
        out["tool_calls"] = [dict(call, type="function") for call in message.get("tool_calls") or []] or None
        out["source"] = "generate"
        if message.get("source"):
            out["metadata"] = {"agent": message["source"]}
    elif message["role"] == "tool":
        out.update(tool_call_id=message["tool_call_id"], function=message["function"])
        if "error" in message:
            out["error"] = {"type": "unknown", "message": message["error"][:2000]}
    return out


def _sample(run: ExportRun, row: ResultRow, model: str) -> dict[str, Any]:
    scores = {name: {"value": float(s.get("value") or 0.0), "answer": row.answer,
                     "explanation": s.get("explanation"), "metadata": {"correct": s["correct"]}}
              for name, s in row.scores.items() if s.get("correct") is not None}
    sample: dict[str, Any] = {
        "id": row.instance_id, "epoch": row.epoch, "input": run.questions.get(row.instance_id, ""),
        "target": row.target or "",
        "messages": [_message(m) for m in transcript.messages(run.trace(row))],
        "output": {"model": model, "completion": row.answer or "",
                   "choices": [{"message": {"role": "assistant", "content": row.answer or "", "source": "generate"},
                                "stop_reason": "stop"}]},
        "scores": scores,
        "metadata": {"level": run.figures.levels.get(row.instance_id), "status": row.status,
                     "answer_source": row.answer_source, "correct": row.correct, "tool_calls": row.tool_calls,
                     "steps": row.steps, "attempt": row.attempt, "trace": row.trace},
        "model_usage": {model: _usage([row], run.figures.report.priced)},
        "total_time": row.duration_s, "working_time": row.duration_s,
        "completed": True,
    }
    if row.started_at:
        sample["started_at"] = row.started_at
    if row.finished_at:
        sample["completed_at"] = row.finished_at
    if row.status == "error":
        message = f"{row.error_kind or 'unknown'}: {row.error or ''}"
        sample["error"] = {"message": message, "traceback": message, "traceback_ansi": message}
    if row.status == "limit" and row.limit:
        sample["limit"] = {"type": LIMITS.get(row.limit, "custom"), "limit": 0, "reason": row.limit}
    return sample


def _metrics(s: ScorerStats) -> dict[str, dict[str, Any]]:
    """A scorer's metrics; with nothing judged, none (Inspect's metric is a number: scored_samples 0 says it)."""
    if s.accuracy is None:
        return {}
    values = {"accuracy": s.accuracy, "ci95_low": s.ci95[0], "ci95_high": s.ci95[1], "mean_score": s.mean_score}
    return {k: {"name": k, "value": v} for k, v in values.items() if v is not None}


def eval_log(run: ExportRun) -> dict[str, Any]:
    """The log as JSON (the module docstring)."""
    figures, report, config = run.figures, run.figures.report, run.figures.run
    model = str(config.get("model") or "unknown")
    rows = [run.latest[(iid, e)] for iid in figures.ids for e in range(1, figures.epochs + 1)
            if (iid, e) in run.latest]
    limits = config.get("limits") or {}
    starts = sorted(r.started_at for r in rows if r.started_at)
    ends = sorted(r.finished_at for r in rows if r.finished_at)
    created = starts[0] if starts else "1970-01-01T00:00:00+00:00"
    run_ids = config.get("run_ids") or [figures.root.name]
    reducer = (config.get("reducers") or [None])[0] if figures.epochs > 1 else None
    scores = [{"name": name, "scorer": name, "reducer": reducer, "scored_samples": s.n - s.no_verdict,
               "unscored_samples": s.no_verdict, "metrics": _metrics(s)} for name, s in report.scorers.items()]
    dataset = str(config.get("dataset") or figures.root.name)
    return {
        "version": 2,
        "status": "success" if len(rows) == len(figures.ids) * figures.epochs else "cancelled",
        "eval": {
            "eval_id": str(run_ids[-1]), "run_id": str(run_ids[-1]), "created": created,
            "task": Path(dataset).name or dataset, "task_id": str(run_ids[0]), "solver": config.get("agent"),
            "dataset": {"name": Path(dataset).name or dataset, "location": dataset, "samples": len(figures.ids),
                        "sample_ids": list(figures.ids)},
            "model": model,
            "config": {"epochs": figures.epochs, "epochs_reducer": list(config.get("reducers") or []) or None,
                       "token_limit": limits.get("max_tokens"),
                       "time_limit": int(limits["instance_timeout"]) if limits.get("instance_timeout") else None},
            "metadata": {"harness_run": config},
        },
        "results": {"total_samples": len(figures.ids) * figures.epochs, "completed_samples": len(rows),
                    "scores": scores},
        "stats": {"started_at": created, "completed_at": ends[-1] if ends else "",
                  "model_usage": {model: _usage([r for r in figures.rows if r.instance_id in set(figures.ids)],
                                                figures.report.priced)}},
        "samples": [_sample(run, row, model) for row in rows],
    }


def render(run: ExportRun) -> tuple[str, list[str]]:
    """The file's text, and no warnings."""
    return json.dumps(eval_log(run), ensure_ascii=False, indent=1) + "\n", []
