"""`harness score DIR`: recompute scores from recorded answers, without re-running agents."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.errors import InputError
from harness.report import Report, build_report, write_report
from harness.results.run_config import lock_output_dir
from harness.results.store import read_rows
from harness.models.config import load_config
from harness.runner.scorers import build_scorers
from harness.scoring import ScoreContext


def rescore(output_dir: Path, scorer_names: list[str], *, config: Path | None = None,
            judge_model: str | None = None) -> Report:
    out = output_dir / "output.jsonl"
    selected_file = output_dir / "selected.json"
    if not out.exists() or not selected_file.exists():
        raise InputError(f"{output_dir} is not a harness run directory (no output.jsonl / selected.json)")
    scorers = build_scorers(scorer_names, load_config(config), judge_model)
    selected = json.loads(selected_file.read_text())
    questions_file = output_dir / "questions.json"
    selected_questions = json.loads(questions_file.read_text()) if questions_file.exists() else {}
    with lock_output_dir(output_dir):
        rows = read_rows(out)
        for row in rows:
            if row.status == "error" or row.target is None:
                continue
            question = selected_questions.get(row.instance_id, "")
            context = ScoreContext(tool_calls=row.tool_calls, total_tokens=row.usage.total_tokens, steps=row.steps,
                                   question=question)
            row.scores = {}
            for scorer in scorers:
                try:
                    row.scores[scorer.name] = scorer.score(row.answer, row.target, context=context).model_dump()
                except Exception as exc:  # noqa: BLE001 - one failed verdict must not abort the rescore
                    row.scores[scorer.name] = {"scorer": scorer.name, "correct": None, "value": 0.0,
                                               "explanation": f"scorer error: {exc}"}
            row.correct = row.scores[scorers[0].name]["correct"]
        tmp = out.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(row.model_dump_json() + "\n" for row in rows))
        os.replace(tmp, out)
        previous = output_dir / "report.json"
        leaked = json.loads(previous.read_text()).get("leaked_containers", 0) if previous.exists() else 0
        report = build_report(rows, list(selected), leaked_containers=leaked, levels=selected)
        write_report(report, output_dir)
    return report
