"""The run pages: one self-contained HTML report (`harness report DIR --html`) and the data the
local viewer (`harness view`) serves. Both render the same page (templates/report.html.j2 with
static/report.js and static/report.css): the static report embeds the data and the traces, the
viewer fetches rows from its API and each trace only when a row is opened.

The static report embeds each trace gzipped (base64), its strings cut at MAX_TEXT characters and
at most MAX_EVENTS events; the page inflates a trace when its row is opened.

Charts are SVG drawn by report.js itself (a few dozen lines, no library): the file must open
offline and stay small, and plotly's inlined JS alone would add about 3.5 MB to every report.

Everything here reads the run directory's raw JSON, so keys another version of the harness
adds (new report keys, new trace events such as `verdict`) are kept and shown, never rejected.

Comparisons (`compare`) pair instances by id, each run's instance reduced to one verdict by its
headline (build.py headline_verdicts: one row's verdict, or with epochs the first reducer's value),
over the ids both runs selected that both finished with a verdict (the others are counted, not
paired). The delta's interval is stats.paired_delta's. Runs of another dataset (run.json's
dataset_fingerprint) or another selection (selected.json's ids) are not compared unless forced:
the comparison says why, with no delta. Without a common instance there is no delta either.

While a run writes (live.py), its in-flight instances are rows of status `running`, and
`progress` gives accuracy so far over the finished instances with a verdict, beside how many of
the selected have finished: unfinished work is never counted as failed there.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
from pathlib import Path
from typing import Any

from harness.report.live import Watcher, is_live
from harness.report.stats import paired_delta, wilson_interval
from harness.results.layout import RunDir

HERE = Path(__file__).parent
MAX_TEXT = 4000  # characters of one string field kept in an embedded trace
MAX_EVENTS = 400  # events of one trace kept in the static report


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_rows(path: Path) -> list[dict]:
    """Every parseable row of output.jsonl, in file order (a torn last line is skipped)."""
    rows: list[dict] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return rows
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "instance_id" in row:
            rows.append(row)
    return rows


def latest_rows(rows: list[dict], epochs: int = 1) -> list[dict]:
    """The latest row per instance (and epoch), in order of first appearance. With epochs, each row's
    `instance_id` is "ID #eN" (the page's row identity) and `instance` keeps the id."""
    latest: dict[tuple[str, int], dict] = {}
    for row in rows:
        latest[str(row["instance_id"]), int(row.get("epoch") or 1)] = row
    if epochs == 1:
        return list(latest.values())
    return [dict(row, instance_id=f"{iid} #e{epoch}", instance=iid) for (iid, epoch), row in latest.items()]


def parse_rows(rows: list[dict]) -> list:
    """The rows as ResultRows (what build.py reads); a row this version cannot read is skipped."""
    from harness.results.model import ResultRow

    parsed = []
    for raw in rows:
        try:
            parsed.append(ResultRow.model_validate(raw))
        except ValueError:
            continue
    return parsed


def epoch_summary(rows: list[dict], selected: dict, report: dict | None, run: dict) -> dict:
    """summarize() for a run with epochs: the headline and per-level figures of build_report (the
    run's reducers), counts of outcomes over every instance run."""
    from harness.report.build import build_report

    parsed = parse_rows(rows)
    built = build_report(parsed, list(selected) or [r.instance_id for r in parsed], leaked_containers=0,
                         levels=selected, epochs=int(run.get("epochs") or 1), reducers=run.get("reducers") or ())
    latest = latest_rows(rows, built.epochs.k if built.epochs else 1)
    outcomes: dict[str, int] = {}
    for row in latest:
        outcomes[str(row.get("status"))] = outcomes.get(str(row.get("status")), 0) + 1
    missing = built.n_missing
    if missing:
        outcomes["missing"] = missing
    out = dict(report or {})
    out.update(json.loads(built.model_dump_json(include={"n_selected", "n_correct", "accuracy", "ci95", "per_level",
                                                         "errors_by_kind", "epochs", "n_judged", "n_no_verdict"})),
               n_rows=len(latest), outcomes=outcomes)
    return out


def read_trace(path: Path, *, truncate: bool = False) -> list[dict]:
    events: list[dict] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return events
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict):
            events.append(_truncate(ev) if truncate else ev)
    if truncate and len(events) > MAX_EVENTS:
        cut = len(events) - MAX_EVENTS
        events = events[: MAX_EVENTS // 2] + [{"type": "truncated", "detail": f"{cut} events left out"}] + events[-MAX_EVENTS // 2:]
    return events


def _truncate(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return value[:MAX_TEXT] + f"\n… [{len(value) - MAX_TEXT} more characters left out of the report]"
    if isinstance(value, dict):
        return {k: _truncate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_truncate(v) for v in value]
    return value


def _level(row: dict, selected: dict) -> str:
    level = row.get("level")
    if level is None:
        level = selected.get(str(row.get("instance_id")))
    return "unknown" if level is None else str(level)


def summarize(rows: list[dict], selected: dict, report: dict | None) -> dict:
    """Accuracy (overall, per level, Wilson 95% CI) over the selected ids (all rows' ids when
    nothing was selected) that have a verdict (an id whose scorer reached none is left out and
    counted: n_no_verdict, as in harness/report/build.py), outcomes and error kinds, from the latest
    rows: fresh while a run writes. Keys of report.json this does not compute are kept."""
    ids = list(selected) or [str(r["instance_id"]) for r in rows]
    by_id = {str(r["instance_id"]): r for r in rows}
    per_level: dict[str, list[int]] = {}
    outcomes: dict[str, int] = {}
    errors: dict[str, int] = {}
    n_correct = no_verdict = 0
    for iid in ids:
        row = by_id.get(iid)
        lvl = _level(row, selected) if row else ("unknown" if selected.get(iid) is None else str(selected[iid]))
        ok = bool(row and row.get("status") != "error" and row.get("correct") is True)
        unjudged = bool(row and row.get("status") != "error" and row.get("correct") is None)
        n_correct += ok
        no_verdict += unjudged
        b = per_level.setdefault(lvl, [0, 0, 0])
        b[0] += 1
        b[1] += ok
        b[2] += unjudged
        outcome = "missing" if row is None else str(row.get("status"))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if row is not None and row.get("status") == "error":
            kind = str(row.get("error_kind") or "unknown")
            errors[kind] = errors.get(kind, 0) + 1
    n = len(ids)
    judged = n - no_verdict
    out = dict(report or {})
    out.update(
        n_selected=n,
        n_rows=len(rows),
        n_correct=n_correct,
        n_judged=judged,
        n_no_verdict=no_verdict,
        accuracy=n_correct / judged if judged else 0.0,
        ci95=list(wilson_interval(n_correct, judged)),
        per_level={
            k: {"n": b[0], "correct": b[1], "no_verdict": b[2], "accuracy": b[1] / (b[0] - b[2]) if b[0] > b[2] else 0.0,
                "ci95": list(wilson_interval(b[1], b[0] - b[2]))}
            for k, b in sorted(per_level.items(), key=lambda kv: (kv[0] == "unknown", kv[0]))
        },
        outcomes=outcomes,
        errors_by_kind=dict(sorted(errors.items(), key=lambda kv: -kv[1])),
    )
    return out


def load_run(root: Path, *, with_traces: bool, watcher: Watcher | None = None) -> dict:
    """One run's page data: config, selection, rows (in-flight instances as rows of status
    `running`), summary (report.json's rules), progress (so far) and whether the run is live.
    `_ids` and `_verdicts` (what comparisons pair) are for build_data, not the page."""
    from harness.report.build import headline_verdicts

    rd = RunDir(Path(root))
    selected = _read_json(rd.selected)
    if isinstance(selected, list):
        selected = {str(i): None for i in selected}
    selected = selected if isinstance(selected, dict) else {}
    run = _read_json(rd.run_json)
    run = run if isinstance(run, dict) else {}
    epochs = int(run.get("epochs") or 1)
    raw = read_rows(rd.output)
    rows = latest_rows(raw, epochs)
    report = _read_json(rd.report)
    report = report if isinstance(report, dict) else None
    ids = list(selected) or list(dict.fromkeys(str(r["instance_id"]) for r in raw))
    verdicts = headline_verdicts(parse_rows(raw), ids, epochs=epochs, reducers=run.get("reducers") or ())
    live = is_live(rd.root)
    flying = (watcher or Watcher(rd.root)).in_flight(ids, live)
    summary = summarize(rows, selected, report) if epochs == 1 else epoch_summary(raw, selected, report, run)
    outcomes = summary.get("outcomes") or {}
    for f in flying:  # an instance not run before and running now is running, not missing
        if verdicts.get(f.instance_id, ("",))[0] == "missing" and outcomes.get("missing"):
            outcomes["missing"] -= 1
            outcomes["running"] = outcomes.get("running", 0) + 1
    if outcomes.get("missing") == 0:
        del outcomes["missing"]
    data = {
        "name": rd.root.name,
        "path": str(rd.root),
        "run": run,
        "selected": selected,
        "live": live,
        "rows": _with_running(rows, flying, epochs, selected),
        "summary": summary,
        "progress": progress(verdicts, {f.instance_id for f in flying}, selected, rows),
        "_ids": ids,
        "_verdicts": verdicts,
        "_running": {f.instance_id for f in flying},
    }
    if with_traces:
        # each trace gzipped and base64'd: the page inflates one when its row opens
        # (DecompressionStream), so a large run's file stays small and parses fast
        data["traces"] = {
            str(r["instance_id"]): pack_trace(read_trace(rd.root / r["trace"], truncate=True))
            for r in data["rows"]
            if r.get("trace") and _inside(rd.root, rd.root / r["trace"]) and (rd.root / r["trace"]).exists()
        }
    return data


def _with_running(rows: list[dict], flying: list, epochs: int, selected: dict) -> list[dict]:
    """The rows, an in-flight (id, epoch) as a `running` row in place of its older row, if any."""
    if not flying:
        return rows
    key = (lambda iid, e: f"{iid} #e{e}") if epochs > 1 else (lambda iid, e: iid)
    running = {key(f.instance_id, f.epoch): {
        "instance_id": key(f.instance_id, f.epoch), "instance": f.instance_id, "epoch": f.epoch, "status": "running",
        "attempt": f.attempt, "trace": f.trace, "level": selected.get(f.instance_id), "idle_s": round(f.seconds, 1),
    } for f in flying}
    out = [running.pop(str(r["instance_id"]), r) for r in rows]
    return out + list(running.values())


def progress(verdicts: dict[str, tuple[str, float, bool]], running: set[str], selected: dict, rows: list[dict]) -> dict:
    """Accuracy so far: over the finished instances with a verdict (an errored one is finished, a
    failure), overall and per level, with how many of the selected finished, run or have no verdict.
    Unfinished (missing or running) instances are in no denominator here."""
    level_of = {str(r.get("instance", r["instance_id"])): r.get("level") for r in rows}
    zero = {"n_selected": 0, "n_finished": 0, "n_running": 0, "n_no_verdict": 0, "n_judged": 0, "n_correct": 0,
            "value": 0.0, "binary": True}
    buckets: dict[str, dict] = {}
    total = dict(zero)
    for iid, (outcome, value, passed) in verdicts.items():
        level = selected.get(iid)
        level = level_of.get(iid) if level is None else level
        b = buckets.setdefault("unknown" if level is None else str(level), dict(zero))
        for acc in (total, b):
            acc["n_selected"] += 1
            if iid in running:
                acc["n_running"] += 1
            elif outcome != "missing":
                acc["n_finished"] += 1
                if outcome == "no_verdict":
                    acc["n_no_verdict"] += 1
                else:
                    acc["n_judged"] += 1
                    acc["n_correct"] += passed
                    acc["value"] += value
                    acc["binary"] = acc["binary"] and value in (0.0, 1.0)

    def finish(acc: dict) -> dict:
        n, binary = acc["n_judged"], acc.pop("binary")
        acc["accuracy"] = acc.pop("value") / n if n else 0.0
        acc["ci95"] = list(wilson_interval(acc["n_correct"], n)) if binary else None
        return acc

    out = finish(total)
    out["per_level"] = {k: finish(b) for k, b in sorted(buckets.items(), key=lambda kv: (kv[0] == "unknown", kv[0]))}
    return out


def pack_trace(events: list[dict]) -> str:
    raw = json.dumps(events, separators=(",", ":"), default=str).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def unpack_trace(packed: str) -> list[dict]:
    return json.loads(gzip.decompress(base64.b64decode(packed)))


def _inside(root: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def differences(base: dict, other: dict) -> list[str]:
    """Why two runs do not compare like with like: another dataset, another selection."""
    out = []
    fp = [(r.get("run") or {}).get("dataset_fingerprint") for r in (base, other)]
    if fp[0] and fp[1] and fp[0] != fp[1]:
        out.append(f"another dataset (dataset_fingerprint {fp[0]} vs {fp[1]})")
    a, b = set(base["_ids"]), set(other["_ids"])
    if a != b:
        out.append(f"another selection ({len(a)} vs {len(b)} instances, {len(a & b)} in common)")
    return out


def compare(base: dict, other: dict, *, force: bool = False) -> dict:
    """Per instance fixed (failed in base, passed in other) / broken / unchanged, and the paired
    delta with its 95% interval (stats.paired_delta), over the ids both runs selected and finished
    with a verdict. `compared` is False, with no delta, when there is nothing to pair or the runs
    differ (`reasons`) and force is not set."""
    reasons = differences(base, other)
    theirs = set(other["_ids"])
    common = [i for i in base["_ids"] if i in theirs]

    def judged(run: dict, iid: str) -> bool:
        return run["_verdicts"][iid][0] not in ("missing", "no_verdict") and iid not in run["_running"]

    paired = [i for i in common if judged(base, i) and judged(other, i)]
    out = {"base": base["name"], "other": other["name"], "same_dataset": not any(r.startswith("another dataset") for r in reasons),
           "reasons": reasons, "forced": bool(reasons and force), "n_common": len(common), "n": len(paired),
           "n_left_out": len(common) - len(paired), "compared": False, "base_accuracy": None,
           "other_accuracy": None, "delta": None, "delta_ci95": None,
           "fixed": [], "broken": [], "unchanged_pass": [], "unchanged_fail": []}
    if (reasons and not force) or not paired:
        return out
    d = paired_delta([(base["_verdicts"][i][1], other["_verdicts"][i][1]) for i in paired])
    out.update(compared=True, base_accuracy=d.base, other_accuracy=d.other, delta=d.delta, delta_ci95=list(d.ci95))
    for iid in paired:
        before, after = base["_verdicts"][iid][2], other["_verdicts"][iid][2]
        out["fixed" if after and not before else "broken" if before and not after
            else "unchanged_pass" if after else "unchanged_fail"].append(iid)
    return out


def comparison_line(c: dict) -> str:
    """One line for the terminal: the delta, or why there is none."""
    head = f"{c['other']} vs {c['base']}: "
    if c["reasons"] and not c["forced"]:
        return head + "not compared: " + "; ".join(c["reasons"]) + " (--compare compares them anyway)"
    if not c["n_common"]:
        return head + "no common instances, nothing to compare"
    if not c["compared"]:
        return head + f"none of the {c['n_common']} common instances finished with a verdict in both runs"
    lo, hi = c["delta_ci95"]
    line = (head + f"{c['base_accuracy']:.1%} -> {c['other_accuracy']:.1%} over {c['n']} paired instances, "
            f"delta {c['delta']:+.1%} [{lo:+.1%}, {hi:+.1%}], fixed {len(c['fixed'])}, broken {len(c['broken'])}")
    if c["n_left_out"]:
        line += f"; {c['n_left_out']} common instances left out (unfinished or without a verdict in a run)"
    if c["forced"]:
        line += "; compared anyway: " + "; ".join(c["reasons"])
    return line


def unique_names(runs: list[dict]) -> None:
    seen: dict[str, int] = {}
    for run in runs:
        name = run["name"]
        if name in seen:
            seen[name] += 1
            run["name"] = f"{name} ({seen[name]})"
        else:
            seen[name] = 1


def build_data(dirs: list[Path], *, with_traces: bool, baseline: int | None = 0, force: bool = False,
               watchers: dict[Path, Watcher] | None = None) -> dict:
    """Every run's data; with a baseline (an index into dirs), each other run compared with it."""
    runs = [load_run(Path(d), with_traces=with_traces, watcher=(watchers or {}).get(Path(d))) for d in dirs]
    unique_names(runs)
    if baseline is not None and not 0 <= baseline < len(runs):
        baseline = None
    comparisons = [] if baseline is None else [
        dict(compare(runs[baseline], run, force=force), other_index=k) for k, run in enumerate(runs) if k != baseline]
    for run in runs:
        for key in ("_ids", "_verdicts", "_running"):
            run.pop(key)
    return {"runs": runs, "baseline": baseline, "force": force, "comparisons": comparisons}


def _asset(name: str) -> str:
    return (HERE / "static" / name).read_text(encoding="utf-8")


def render_page(*, data: dict | None, mode: str, title: str) -> str:
    """The page; `data` is embedded (static report) or None (the viewer fetches /api/data)."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html", "j2"]))
    payload = None
    if data is not None:
        # safe inside <script>: no "</" can close the element
        payload = json.dumps(data, separators=(",", ":"), default=str).replace("</", "<\\/").replace("<!--", "<\\!--")
    return env.get_template("report.html.j2").render(
        title=title, mode=mode, payload=payload, css=_asset("report.css"), js=_asset("report.js")
    )


def write_html_report(dirs: list[Path], out: Path, *, force: bool = False) -> Path:
    """The static report; the first run is the baseline of the others (force: compare runs of
    another dataset or selection too)."""
    data = build_data(dirs, with_traces=True, force=force)
    title = "harness report: " + ", ".join(r["name"] for r in data["runs"])
    html = render_page(data=data, mode="static", title=title)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    return out
