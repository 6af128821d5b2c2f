"""`harness score DIR`: recompute scores from recorded answers, without re-running agents.

Scores go through the same path as `harness run` (scoring/apply.py), with the context
rebuilt from the rows and run.json (limits) and questions.json (questions), so the
same scorer gives the same verdict on the same row.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.agents.contract import Limits
from harness.errors import InputError
from harness.fsutil import write_atomic
from harness.models.config import load_config
from harness.report import Report, build_report, write_report
from harness.results.layout import RunDir
from harness.results.run_config import load_run_config, lock_output_dir
from harness.results.store import read_rows
from harness.runner.scorers import build_scorers
from harness.scoring.apply import context_for, score_row


def rescore(output_dir: Path, scorer_names: list[str], *, config: Path | None = None,
            judge_model: str | None = None) -> Report:
    layout = RunDir(Path(output_dir))
    if not layout.output.exists() or not layout.selected.exists():
        raise InputError(f"{output_dir} is not a harness run directory (no output.jsonl / selected.json)")
    scorers = build_scorers(scorer_names, load_config(config), judge_model)
    selected = json.loads(layout.selected.read_text())
    questions = json.loads(layout.questions.read_text()) if layout.questions.exists() else {}
    run_config = load_run_config(layout.root)
    limits = Limits(**run_config.limits) if run_config else Limits()
    with lock_output_dir(layout.root):
        rows = read_rows(layout.output)
        for row in rows:
            if row.status == "error":
                continue
            context = context_for(tool_calls=row.tool_calls, total_tokens=row.usage.total_tokens, steps=row.steps,
                                  max_tokens=limits.max_tokens, max_steps=limits.max_steps,
                                  question=questions.get(row.instance_id, ""))
            row.scores, row.correct = score_row(row.answer, row.target, scorers, context)
        write_atomic(layout.output, "".join(row.model_dump_json() + "\n" for row in rows))
        leaked = json.loads(layout.report.read_text()).get("leaked_containers", 0) if layout.report.exists() else 0
        report = build_report(rows, list(selected), leaked_containers=leaked, levels=selected)
        write_report(report, layout.root)
    return report
