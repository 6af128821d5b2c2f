"""Report outputs: DIR/report.json, a summary CSV across runs, a terminal table and the lines
after it (`end_lines`: which instances did not end well, where the run is, how to open it).

The summary CSV (by default DIR/../summary.csv, beside other runs' directories) holds one row per
output directory: its `output_dir` column (the directory's absolute path) identifies the row, and a
resume or rescore of that directory replaces its row instead of adding one.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import os
import shlex
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from harness.answers import EXAMPLE_ANSWER
from harness.benchmark import Figures, get
from harness.fsutil import write_atomic
from harness.models.textcalls import PARSERS, TEXT_TOOL_CALLS
from harness.report.build import ReplayStats, Report
from harness.terminal import listed
from harness.text import model_json

REPORT_JSON = "report.json"
BREAKDOWN_NAMES = {"tool_family": "per tool family", "steps": "per annotated step count"}  # GAIA's labels


def write_report(report: Report, output_dir: Path) -> Path:
    """Write DIR/report.json atomically; returns its path."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / REPORT_JSON
    write_atomic(path, model_json(report, indent=2) + "\n")
    return path


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def summary_row(report: Report, *, run_label: str, extra: dict[str, Any]) -> dict[str, Any]:
    """One flat CSV row: label, timestamp, `extra`, then the headline metrics."""
    row: dict[str, Any] = {
        "run_label": run_label,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        **extra,
        "n_selected": report.n_selected,
        "n_correct": report.n_correct,
        "accuracy": _round(report.accuracy),
        "ci95_low": _round(report.ci95[0]),
        "ci95_high": _round(report.ci95[1]),
        "stderr": _round(report.stderr),
    }
    if report.n_unscored:  # said beside; with nothing judged there is no accuracy at all
        row["n_unscored"] = report.n_unscored
        if not report.n_judged:
            row.update(accuracy=None, ci95_low=None, ci95_high=None, stderr=None)
    for level, at_level in report.per_level.items():
        row[f"accuracy_level_{level}"] = _round(at_level.accuracy)
    for name, scorer in list(report.scorers.items())[1:]:  # the first is the headline accuracy
        row[f"accuracy_{name}"] = _round(scorer.accuracy)
    row.update(
        n_errors=report.n_errors,
        n_missing=report.n_missing,
        n_limit=sum(report.n_limit.values()),
        tokens_total=report.tokens["total"],
        cost=_round(report.cost, 6) if report.priced else None,  # not priced: empty, never 0
        llm_calls=report.llm_calls,
        time_mean_s=_round(report.time_per_instance_s.mean, 2),
        wall_time_s=_round(report.wall_time_s, 2),
        leaked_containers=report.leaked_containers,
    )
    return row


@contextlib.contextmanager
def folder_lock(folder: Path, timeout: float = 30.0) -> Iterator[None]:
    """An exclusive lock on `folder` itself (flock on its descriptor), so writers of a summary.csv in
    it take turns and no lock file is left beside the CSV; TimeoutError after `timeout` seconds."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{folder}: another run held its summary.csv for {timeout:g} s") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # and the lock with it


def append_summary(report: Report, csv_path: Path, *, run_label: str, extra: dict[str, Any],
                   output_dir: Path | None = None) -> None:
    """Add this run's row. With `output_dir`, the row of that directory (its `output_dir` column)
    is replaced, so a re-run or rescore leaves one row per directory. A new column (a new level,
    scorer or extra key) widens the header; older rows get it empty."""
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    row = summary_row(report, run_label=run_label, extra=extra)
    if output_dir is not None:
        row = {"output_dir": str(Path(output_dir).resolve()), **row}
    with folder_lock(csv_path.parent):
        header: list[str] = []
        old: list[dict[str, str]] = []
        if csv_path.exists() and csv_path.stat().st_size:
            with open(csv_path, newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                header = list(reader.fieldnames or [])
                old = list(reader)
        if output_dir is not None:
            old = [r for r in old if r.get("output_dir") != row["output_dir"]]
        fields = header + [k for k in row if k not in header]
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=fields)
        writer.writeheader()
        writer.writerows(old)
        writer.writerow(row)
        write_atomic(csv_path, text.getvalue())


def _pct(x: float | None) -> str:
    return "not judged" if x is None else f"{100 * x:.1f}%"


def _ci(ci: tuple[float, float]) -> str:
    return f"[{_pct(ci[0])}, {_pct(ci[1])}]"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counts.items()) or "none"


NOT_PRICED = "not priced (no price_*_per_1k)"


def cost_line(r: Report) -> str:
    """The run's cost: the agents' calls, then the judge's and the total when it was called, and per level."""
    c = r.costs
    if not r.priced:  # the agents' model has no prices: no figure at all, never $0
        line = f"{NOT_PRICED} / {r.llm_calls}"
        if c.judge_calls:
            line += f"; judge ${c.judge:.4f} / {c.judge_calls}"
        return line + (f"; {r.cache_hits} answered by --cache" if r.cache_hits else "")
    line = f"${r.cost:.4f} / {r.llm_calls}"
    if c.judge_calls:
        line += f"; judge ${c.judge:.4f} / {c.judge_calls}; total ${c.total:.4f}"
    if len(c.per_level) > 1:
        line += "; per level " + ", ".join(f"{level} ${cost:.4f}" for level, cost in c.per_level.items())
    if r.cache_hits:
        line += f"; {r.cache_hits} answered by --cache"
    return line


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}s"


def _over_judged(s) -> str:
    """A rate (LevelStats, ScorerStats) over its judged, `correct/judged = p%  [CI]`, and what it leaves
    out said beside it; with nothing judged, no percentage at all."""
    unscored = getattr(s, "unscored", 0)
    judged = s.n - s.no_verdict - unscored
    rate = "none judged" if s.accuracy is None or not judged \
        else f"{s.correct}/{judged} = {_pct(s.accuracy)}  {_ci(s.ci95)}"
    return rate + (f"  ({s.no_verdict} not judged: no verdict)" if s.no_verdict else "") + _unscored(unscored)


def _unscored(n: int, of: int | None = None) -> str:
    """What an unscored count adds beside a figure: `(N [of M] unscored: no target)`, or nothing."""
    return f"  ({n}{f' of {of}' if of is not None else ''} unscored: no target)" if n else ""


def replay_line(replay: ReplayStats) -> str:
    """Divergences of a replay from its recording, with their ids, and what could not be checked."""
    line = f"divergences: {replay.divergences}"
    if replay.diverged:
        line += f" (ids {listed(list(replay.diverged), 5)})"
    line += f" of {replay.checked} tool results checked"
    if replay.not_checked:
        line += (f"; not checked: {replay.not_checked} tool results of {len(replay.not_checked_ids)} instance(s), "
                 f"the recording has no fingerprint for them (ids {listed(replay.not_checked_ids, 5)})")
    return line


def wall_line(walls: dict[str, int], selected: int) -> str:
    """How many instances met a CAPTCHA or bot wall (Report.walls), with their ids: score the web refused."""
    return (f"blocked by the web: {len(walls)} of {selected} instance(s) met a CAPTCHA or bot wall "
            f"({sum(walls.values())} response(s)): {listed(list(walls))}")


def disagreement_line(found: dict) -> str:
    """Where the strict GAIA scorer and the lenient judge differ (harness/report/disagreement.py), ids named."""
    lenient, strict = found["lenient_only"], found["strict_only"]
    ids = lambda items: f" ({listed([d['instance_id'] for d in items], 5)})" if items else ""  # noqa: E731
    return (f"{len(lenient) + len(strict)} of {found['compared']} disagree: {len(lenient)} right but badly "
            f"formatted (judge only){ids(lenient)}, {len(strict)} the reverse (gaia only){ids(strict)}")


def render(report: Report) -> Table:
    """A compact two-column table: overall, per level, failures, usage, time, leaks."""
    table = Table(title="Run report", show_header=False, title_justify="left")
    table.add_column("metric", style="bold")
    table.add_column("value")
    r = report
    head = next(iter(r.scorers.values()), None)
    mean_score = f", mean score {head.mean_score:.3f}" if head and head.mean_score is not None and not r.epochs else ""
    judged = r.n_selected if r.n_judged is None else r.n_judged  # the denominator: ids with a verdict
    words = r.words
    rate = words.get("rate", "accuracy")
    table.add_row(f"{rate} ({r.headline})" if r.headline else rate,
                  ("none judged" if r.accuracy is None or not judged
                   else f"{r.n_correct}/{judged} = {_pct(r.accuracy)} (stderr {_pct(r.stderr)}){mean_score}")
                  + (f"  ({r.n_no_verdict} of {r.n_selected} not judged: no verdict)" if r.n_no_verdict else "")
                  + _unscored(r.n_unscored, r.n_selected))
    if r.accuracy is not None:  # nothing judged: no interval either
        table.add_row("95% CI (Wilson)", _ci(r.ci95))
    if r.epochs:
        e = r.epochs
        table.add_row("epochs", f"{e.k}; headline reducer {e.primary}; answers agree in {_pct(e.agreement)} of "
                                f"pairs, all epochs in {_pct(e.all_agree)} of instances")
        for name, red in e.reducers.items():
            ties = f"  ({len(red.ties)} tied majority)" if red.ties else ""
            table.add_row(f"reducer {name}", "none judged" if red.value is None
                          else f"{_pct(red.value)}  {_ci(red.ci95)}  passes {red.passed}{ties}")
        for epoch, s in e.per_epoch.items():
            table.add_row(f"epoch {epoch}", _over_judged(s))
    for name, sc in list(r.scorers.items())[1:]:  # pass rate beside mean score (graded: at their threshold)
        table.add_row(f"scorer {name}", _over_judged(sc) + ("" if sc.mean_score is None
                                                             else f"  mean score {sc.mean_score:.3f}"))
    for name, sc in r.scorers.items():  # a scorer that raised or gave nonsense: counted, its first error shown
        if sc.no_verdict:
            table.add_row(f"[bold red]no verdict ({name})[/bold red]", Text(
                f"{sc.no_verdict} of {sc.n}; first: {sc.first_error or '-'}", style="red"))
    for field, groups in r.breakdowns.items():
        if any(field in _figures(name).fields for name in r.figures):  # shown in the benchmark's own below
            continue
        table.add_row(BREAKDOWN_NAMES.get(field, field), "; ".join(
            (f"{k} not judged" if g.get("accuracy") is None else
             f"{k} {g['correct']}/{g['n'] - g.get('no_verdict', 0)} = {_pct(g['accuracy'])}"
             + (f" {_ci(tuple(g['ci95']))}" if g.get("ci95") else ""))
            + (f" ({g['no_verdict']} not judged)" if g.get("no_verdict") else "") for k, g in groups.items()))
    for name, found in r.figures.items():
        for label, value in _figures(name).lines(found):
            table.add_row(label, value)
    if r.disagreements:
        table.add_row("gaia vs llm_judge", disagreement_line(r.disagreements))
    if r.retrieval and r.retrieval.get("mean") is not None:
        table.add_row("evidence recall", f"{_pct(r.retrieval['mean'])} over {r.retrieval['n']} rows with evidence")
    table.add_section()
    for level, s in r.per_level.items() if words.get("groups", "level") == "level" else ():
        table.add_row(f"level {level}", _over_judged(s))
    table.add_section()
    missing = sum(sc.no_verdict for sc in r.scorers.values())
    table.add_row("errors", f"{r.n_errors} ({_counts(r.errors_by_kind)})"
                            + (f"; scorer: {missing} verdict(s) missing" if missing else ""))
    for kind, first in r.first_errors.items():  # as a scorer's: the first of each kind, said
        table.add_row(f"[bold red]first {kind} error[/bold red]", Text(first, style="red"))
    table.add_row("missing", str(r.n_missing))
    table.add_row("limits hit", _counts(r.n_limit))
    table.add_row("answer sources", _counts(r.answer_sources))
    if r.copied_example:
        table.add_row("[bold yellow]copied example answer[/bold yellow]",
                      Text(f"{len(r.copied_example)} of {r.n_selected}: {listed(r.copied_example)}", style="yellow"))
    if r.bracketed:
        table.add_row("[bold yellow]answers in brackets[/bold yellow]",
                      Text(f"{len(r.bracketed)} of {r.n_selected}: {listed(r.bracketed)}", style="yellow"))
    if r.cut_replies:
        table.add_row("[bold yellow]replies cut at a token cap[/bold yellow]", Text(
            f"{sum(r.cut_replies.values())} replies in {len(r.cut_replies)} of {r.n_selected} instances",
            style="yellow"))
    if r.text_tool_calls:
        table.add_row("[bold yellow]tool calls as text[/bold yellow]", Text(
            f"{sum(r.text_tool_calls.values())} replies in {len(r.text_tool_calls)} of {r.n_selected} instances",
            style="yellow"))
    if r.env_outcomes:
        table.add_row("env actions", "; ".join(f"{env} {_counts(c)}" for env, c in r.env_outcomes.items()))
    if r.replay:
        table.add_row("replay check", replay_line(r.replay))
    table.add_section()
    t = r.tokens
    details = "".join(f", {label} {t[key]:,}" for key, label in (("cached_prompt", "cached prompt"),
                                                                  ("cache_write", "cache writes"),
                                                                  ("reasoning", "reasoning")) if t.get(key))
    table.add_row("tokens", f"{t['total']:,} (prompt {t['prompt']:,}, completion {t['completion']:,}{details})")
    table.add_row("cost / llm calls", cost_line(r))
    tp = r.time_per_instance_s
    table.add_row("time per instance", f"mean {_secs(tp.mean)}, median {_secs(tp.median)}, p90 {_secs(tp.p90)}")
    table.add_row("wall time", _secs(r.wall_time_s))
    table.add_section()
    if r.clean:
        table.add_row("leaked containers", "[green]0[/green]")
    else:
        table.add_row("leaked containers", f"[bold red]{r.leaked_containers} LEAKED - cleanup failed[/bold red]")
    return table


# The report's id lists the terminal names after the table, in this order, each bounded (terminal.listed).
_NAMED = (("errored", "errored"), ("no_verdict", "{unjudged} (a scorer failed)"), ("missing", "not run"),
          ("limit", "hit a limit"), ("failed", "{wrong}"))


def model_warnings(report: Report) -> list[str]:
    """What the model's replies say of the prompt or the server: answers that copied the prompt's example,
    tool calls written as text (each a line starting "warning:")."""
    lines = []
    if copied := report.copied_example:
        lines.append(f"warning: {len(copied)} answer(s) are the prompt's example {EXAMPLE_ANSWER!r} copied, not an "
                     f"answer: {listed(copied)}")
    if inside := report.bracketed:
        lines.append(f"warning: {len(inside)} answer(s) are wrapped in square brackets, which a scorer may read as "
                     f"no number or another string: {listed(inside)}")
    if cut := report.cut_replies:
        lines.append(f"warning: {sum(cut.values())} model replies in {len(cut)} instance(s) were cut at a token cap "
                     f"(finish_reason length: {listed(list(cut))}): a model looping, or a cap too low: the model "
                     "section's max_tokens when set, else the server's own (llama.cpp: --n-predict)")
    if calls := report.text_tool_calls:
        blobs = report.answer_sources.get("text_tool_call", 0)
        lines.append(f"warning: {sum(calls.values())} model replies in {len(calls)} instance(s) were tool calls "
                     f"written as text ({listed(list(calls))}); {blobs} final answer(s) were one and count as no "
                     f"answer: {TEXT_TOOL_CALLS} {PARSERS}, or, if it is on, the model wrote its calls in "
                     "a form of its own (inside <solution>, after <tools></tools>): such calls are not run")
    return lines


def end_lines(report: Report, run_dir: Path | None = None) -> list[str]:
    """The lines after the table: the ids of each outcome but a pass (first 10, then "+N more"), the
    instances that met a CAPTCHA or bot wall, then, given the run's directory, where it is and the
    commands that open it."""
    said = {"wrong": report.words.get("wrong", "wrong answer"), "unjudged": report.words.get("unjudged", "no verdict")}
    lines = [f"{words.format(**said)} ({len(ids)}): {listed(ids)}" for outcome, words in _NAMED
             if (ids := report.ids.get(outcome))]
    notes = list(report.verdict_notes.items())  # what the benchmark's verdict says of each (Harbor: the verifier's)
    lines += [f"  {iid}: {note}" for iid, note in notes[:10]] + ([f"  +{len(notes) - 10} more"] if notes[10:] else [])
    if walls := report.walls():
        lines.append(wall_line(walls, report.n_selected))
    lines += model_warnings(report)
    lines += [f"warning: {told}" for name, found in report.figures.items()  # a benchmark's own (Figures.warning)
              if (warn := _figures(name).warning) is not None and (told := warn(found))]
    if run_dir is not None:
        quoted = shlex.quote(str(run_dir))
        lines += [f"run directory: {run_dir}",
                  f"open it: harness report {quoted} --html (one HTML file), or harness view {quoted} (in a browser)"]
    return lines


def _figures(benchmark: str) -> Figures:
    """The benchmark's own figures (a report has them only of a benchmark that declares some)."""
    declared = get(benchmark).figures
    assert declared is not None, benchmark
    return declared
