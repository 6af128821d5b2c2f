"""`harness export DIR --format jsonl`: the rows flattened, one JSON object of scalars a line, for
spreadsheets and pandas (`pandas.read_json(FILE, lines=True)`).

One line per selected (instance, epoch), in selection order: its latest row, or status
"missing" when it has none. Every line has the same keys (COLUMNS, then per scorer of the run
``score.NAME.correct`` / ``score.NAME.value``, then the breakdown labels tasks.json holds as
``label.NAME``, a list joined by "; ": ``label.steps`` is GAIA's steps bucket, ``steps`` the row's model
calls), a value absent where it does not apply (null). Tokens are by class as the row holds them (USAGE),
and the LLM judge's calls, tokens and cost are ``judge_*``, apart from the agent's (`cost` null when the
agent's model is not priced: report.json's `priced`); `unscored` is why a
row is not judged (no target), null when it is. `level` is the report's level key
(the dataset's level, "unknown" without one), `correct` the headline scorer's verdict.
"""

from __future__ import annotations

import json
from typing import Any

from harness.export.source import ExportRun

COLUMNS = ("instance_id", "epoch", "level", "status", "answer", "answer_source", "target", "correct",
           "unscored", "error_kind", "error", "limit", "prompt_tokens", "completion_tokens", "total_tokens",
           "cached_prompt_tokens", "cache_write_tokens", "reasoning_tokens", "llm_calls", "cache_hits", "cost",
           "judge_calls", "judge_tokens", "judge_cost", "steps", "tool_calls", "user_replies", "duration_s",
           "started_at", "finished_at", "attempt", "trace")
# the agent's usage (harness/usage.py Usage: cached, cache-write and reasoning tokens are within the
# prompt and completion tokens) and the LLM judge's, each row's own
USAGE = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_prompt_tokens", "cache_write_tokens",
         "reasoning_tokens", "llm_calls", "cache_hits", "cost")
EXPECTATIONS = ("expected_tool_calls", "max_steps", "max_tokens", "evidence", "unscored")  # tasks.json: no labels


def _scalar(value: Any) -> Any:
    if isinstance(value, list):
        return "; ".join(map(str, value))
    return value if value is None or isinstance(value, (str, int, float, bool)) else json.dumps(value)


def rows(run: ExportRun) -> list[dict[str, Any]]:
    """The flat lines (the module docstring)."""
    figures = run.figures
    scorers = list(dict.fromkeys(name for row in run.latest.values() for name in row.scores))
    labels = list(dict.fromkeys(k for t in run.tasks.values() for k in t if k not in EXPECTATIONS))
    out = []
    for iid in figures.ids:
        for epoch in range(1, figures.epochs + 1):
            row = run.latest.get((iid, epoch))
            line: dict[str, Any] = dict.fromkeys(COLUMNS)
            line.update(instance_id=iid, epoch=epoch, level=figures.levels.get(iid), status="missing")
            if row is not None:
                line.update({k: getattr(row, k) for k in COLUMNS if k not in ("level", "tool_calls") and
                             hasattr(row, k)})
                line.update({k: getattr(row.usage, k) for k in USAGE})
                if not figures.report.priced:  # the model has no prices: no cost, never 0
                    line["cost"] = None
                line.update(judge_calls=row.judge_usage.llm_calls, judge_tokens=row.judge_usage.total_tokens,
                            judge_cost=row.judge_usage.cost, tool_calls=len(row.tool_calls))
            for name in scorers:
                score = row.scores.get(name) if row is not None else None
                line[f"score.{name}.correct"] = score.get("correct") if score else None
                line[f"score.{name}.value"] = score.get("value") if score else None
            task = run.tasks.get(iid, {})
            line.update({f"label.{label}": _scalar(task.get(label)) for label in labels})
            out.append(line)
    return out


def render(run: ExportRun) -> tuple[str, list[str]]:
    """The file's text, and no warnings."""
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in rows(run)), []
