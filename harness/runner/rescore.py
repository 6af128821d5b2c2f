"""`harness score DIR`: recompute scores from recorded answers, without re-running agents.

Scores go through the same path as `harness run` (scoring/apply.py), with the context
rebuilt from the rows and run.json (limits), questions.json (questions), tasks.json (expectations)
and metadata.json (each instance's dataset metadata), so the same scorer gives the same verdict on
the same row.

What it rewrites: output.jsonl's rows (scores and correct; the judge's cost is added to the row's
judge_usage, so the run's cost counts every scoring's judge calls), report.json (wall time and leaked
containers kept from the run's report), this directory's row of DIR/../summary.csv (replaced), and
each scored row's trace gains a `verdict` event of source "rescore" (the last verdict is current).
A verdict a scorer cannot reach is counted in report.json, not guessed (`harness score` then exits 3,
naming the scorer: Report.missing_verdicts).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.agents.contract import Limits
from harness.benchmark import CUSTOM
from harness.config import Scoring
from harness.errors import InputError
from harness.fsutil import write_atomic
from harness.report import Report, append_summary, build_report, write_report
from harness.results.layout import RunDir
from harness.results.store import latest_by_key, read_rows
from harness.runner.appends import append_verdict, judge_calls
from harness.runner.run_config import load_run_config, lock_output_dir
from harness.runner.scorers import build_scorers, judging
from harness.scoring.apply import context_for, judge_usage, score_row, unscored_reason
from harness.text import model_json
from harness.traces import JudgeCall


def rescore(output_dir: Path, scoring: Scoring) -> Report:
    """Score DIR's rows again with `scoring` (`harness score`'s flags and TOML: harness/config.py)."""
    layout = RunDir(Path(output_dir))
    if not layout.output.exists() or not layout.selected.exists():
        raise InputError(f"{output_dir} is not a harness run directory (no output.jsonl / selected.json)")
    selected = json.loads(layout.selected.read_text())
    questions = json.loads(layout.questions.read_text()) if layout.questions.exists() else {}
    expected = json.loads(layout.tasks.read_text()) if layout.tasks.exists() else {}
    metadata = json.loads(layout.metadata.read_text()) if layout.metadata.exists() else {}
    run_config = load_run_config(layout.root)
    if not scoring.given and run_config is not None and run_config.scorers:  # the run's own scorers
        recorded = tuple(name for name in run_config.scorers if not name.startswith("judge="))
        scoring = scoring.model_copy(update={"names": recorded, "given": True})
    benchmarks = {expected.get(iid, {}).get("benchmark") or metadata.get(iid, {}).get("benchmark") or CUSTOM
                  for iid in selected}  # tasks.json's; a run from before Instance.benchmark: its metadata's
    scorers = build_scorers(judging(scoring, benchmarks))
    limits = run_config.limits if run_config else Limits()
    with lock_output_dir(layout.root):
        rows = read_rows(layout.output)
        calls: dict[int, list[JudgeCall]] = {}
        for row in rows:
            if row.status == "error":
                continue
            task = expected.get(row.instance_id, {})
            context = context_for(tool_calls=row.tool_calls, total_tokens=row.usage.total_tokens, steps=row.steps,
                                  limits=limits.tightened(task.get("max_steps"), task.get("max_tokens")),
                                  question=questions.get(row.instance_id, ""),
                                  expected_tool_calls=task.get("expected_tool_calls"),
                                  instance_id=row.instance_id, metadata=metadata.get(row.instance_id),
                                  verdicts=row.verdicts)
            row.scores, row.correct = score_row(row.answer, row.target, scorers, context)
            calls[id(row)] = judge_calls(row.scores)  # out of the row, into the trace
            row.judge_usage = row.judge_usage + judge_usage(row.scores)  # the run's judge cost, and this one's
            row.unscored = unscored_reason(row.target)
        write_atomic(layout.output, "".join(model_json(row) + "\n" for row in rows))
        scored = {id(row) for row in latest_by_key(rows).values()}
        for row in rows:
            if row.trace and id(row) in scored and row.status != "error":
                append_verdict(layout.root / row.trace, row, "rescore", calls.get(id(row), ()))
        previous = json.loads(layout.report.read_text()) if layout.report.exists() else {}
        report = build_report(rows, list(selected), leaked_containers=previous.get("leaked_containers", 0),
                              wall_time_s=previous.get("wall_time_s"), levels=selected,
                              epochs=run_config.epochs if run_config else 1,
                              reducers=run_config.reducers if run_config else (),
                              normalize=getattr(scorers[0], "normalize", None), tasks=expected,
                              run_dir=layout.root, priced=not (run_config and run_config.prices == "unset"))
        write_report(report, layout.root)
        extra = ({"model": run_config.model, "agent": run_config.agent, "dataset": run_config.dataset}
                 if run_config else {})
        append_summary(report, layout.root.parent / "summary.csv", run_label=layout.root.name,
                       output_dir=layout.root, extra=extra)
    return report
