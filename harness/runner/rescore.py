"""`harness score DIR`: recompute scores from recorded answers, without re-running agents."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.errors import InputError
from harness.report import Report, build_report, write_report
from harness.results.run_config import lock_output_dir
from harness.results.store import read_rows
from harness.scoring import ScoreContext, get_scorer


def rescore(output_dir: Path, scorer_names: list[str]) -> Report:
    out = output_dir / "output.jsonl"
    selected_file = output_dir / "selected.json"
    if not out.exists() or not selected_file.exists():
        raise InputError(f"{output_dir} is not a harness run directory (no output.jsonl / selected.json)")
    try:
        scorers = [get_scorer(name) for name in scorer_names]
    except (ValueError, TypeError) as exc:
        raise InputError(f"--scorer: {exc}") from None
    selected = json.loads(selected_file.read_text())
    with lock_output_dir(output_dir):
        rows = read_rows(out)
        for row in rows:
            if row.status == "error" or row.target is None:
                continue
            context = ScoreContext(tool_calls=row.tool_calls, total_tokens=row.usage.total_tokens, steps=row.steps)
            row.scores = {s.name: s.score(row.answer, row.target, context=context).model_dump() for s in scorers}
            row.correct = row.scores[scorers[0].name]["correct"]
        tmp = out.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(row.model_dump_json() + "\n" for row in rows))
        os.replace(tmp, out)
        previous = output_dir / "report.json"
        leaked = json.loads(previous.read_text()).get("leaked_containers", 0) if previous.exists() else 0
        report = build_report(rows, list(selected), leaked_containers=leaked, levels=selected)
        write_report(report, output_dir)
    return report
