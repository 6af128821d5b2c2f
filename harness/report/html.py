"""The run pages: one self-contained HTML report (`harness report DIR --html`) and the data the
local viewer (`harness view`) serves. Both render the same page (templates/report.html.j2 with
static/report.js and static/report.css): the static report embeds the data and the traces, the
viewer fetches rows from its API and each trace only when a row is opened.

The static report embeds each trace gzipped (base64), its strings cut at MAX_TEXT characters and
at most MAX_EVENTS events; the page inflates a trace when its row is opened.

Charts are SVG drawn by report.js itself (a few dozen lines, no library): the file must open
offline and stay small, and plotly's inlined JS alone would add about 3.5 MB to every report.

This module only renders: every figure comes from load.read_run (the one aggregation: report.json
when current, else build_report over results.store and the traces, the same figures `harness
report DIR` prints), comparisons from compare.py, accuracy so far from live.progress; the page
rows are the store's latest row per (instance, epoch). Keys another version of the harness adds
to report.json, and trace events it adds (traces.read_events), are kept and shown, never rejected;
output.jsonl lines this version cannot read are skipped and counted (`damaged_rows`).

While a run writes (live.py), its in-flight instances are rows of status `running`, and
`progress` gives accuracy so far over the finished instances with a verdict, beside how many of
the selected have finished: unfinished work is never counted as failed there.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

from harness.fsutil import inside, write_atomic
from harness.report.compare import compare
from harness.report.live import Watcher, is_live, progress
from harness.report.load import RunFigures, read_run
from harness.results.store import latest_by_key
from harness.traces import read_events

HERE = Path(__file__).parent
MAX_TEXT = 4000  # characters of one string field kept in an embedded trace
MAX_EVENTS = 400  # events of one trace kept in the static report


def page_trace(root: Path, rel: str | None, *, truncate: bool = False) -> list[dict] | None:
    """A row's trace (`rel`, relative to the run directory) as the page shows it, None when the row
    has none or it lies outside the run directory; truncate: cut as the static report embeds it."""
    path = (Path(root) / rel) if rel else None
    if path is None or not inside(Path(root).resolve(), path.resolve()) or not path.exists():
        return None
    events = read_events(path)
    if not truncate:
        return events
    events = [_truncate(ev) for ev in events]
    if len(events) > MAX_EVENTS:
        cut = len(events) - MAX_EVENTS
        marker = {"type": "truncated", "detail": f"{cut} events left out"}
        events = events[: MAX_EVENTS // 2] + [marker] + events[-MAX_EVENTS // 2:]
    return events


def _truncate(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return value[:MAX_TEXT] + f"\n… [{len(value) - MAX_TEXT} more characters left out of the report]"
    if isinstance(value, dict):
        return {k: _truncate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_truncate(v) for v in value]
    return value


def page_rows(figures: RunFigures) -> list[dict]:
    """The latest row per (instance, epoch), in order of first appearance. With epochs, each row's
    `instance_id` is "ID #eN" (the page's row identity) and `instance` keeps the id."""
    latest = latest_by_key(figures.rows)
    rows = [row.model_dump(mode="json") for row in latest.values()]
    if figures.epochs == 1:
        return rows
    return [dict(row, instance_id=f"{iid} #e{epoch}", instance=iid)
            for (iid, epoch), row in zip(latest, rows, strict=True)]


def summary(figures: RunFigures, rows: list[dict]) -> dict:
    """The overview's figures: report.json's keys (those another harness version wrote too), the
    report's figures over them (load.read_run), the rows' statuses (`outcomes`)."""
    out = dict(figures.written or {})
    out.update(figures.report.model_dump(mode="json"), n_rows=len(rows), outcomes=figures.report.statuses())
    if figures.damaged:
        out["damaged_rows"] = figures.damaged  # output.jsonl lines this version cannot read: said, not shown
    return out


def load_run(root: Path, *, with_traces: bool, watcher: Watcher | None = None) -> dict:
    """One run's page data: config, selection, rows (in-flight instances as rows of status
    `running`), summary (load.read_run's figures), progress (so far) and whether the run is live.
    `_ids`, `_verdicts` and `_running` (what comparisons pair) are for build_data, not the page."""
    figures = read_run(Path(root), lenient=True)
    rows = page_rows(figures)
    live = is_live(figures.root)
    flying = (watcher or Watcher(figures.root)).in_flight(figures.ids, live)
    running = {f.instance_id for f in flying}
    shown = summary(figures, rows)
    outcomes = shown["outcomes"]
    for f in flying:  # an instance not run before and running now is running, not missing
        if figures.verdicts.get(f.instance_id, ("",))[0] == "missing" and outcomes.get("missing"):
            outcomes["missing"] -= 1
            outcomes["running"] = outcomes.get("running", 0) + 1
    if outcomes.get("missing") == 0:
        del outcomes["missing"]
    data: dict[str, Any] = {
        "name": figures.root.name,
        "path": str(figures.root),
        "run": figures.run,
        "selected": figures.selected,
        "live": live,
        "rows": _with_running(rows, flying, figures.epochs, figures.selected),
        "summary": shown,
        "progress": progress(figures.verdicts, running, figures.levels),
        "_ids": figures.ids,
        "_verdicts": figures.verdicts,
        "_running": running,
    }
    if with_traces:
        # each trace gzipped and base64'd: the page inflates one when its row opens
        # (DecompressionStream), so a large run's file stays small and parses fast
        traces = {str(r["instance_id"]): page_trace(figures.root, r.get("trace"), truncate=True)
                  for r in data["rows"]}
        data["traces"] = {iid: pack_trace(events) for iid, events in traces.items() if events is not None}
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


def pack_trace(events: list[dict]) -> str:
    raw = json.dumps(events, separators=(",", ":"), default=str).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def unpack_trace(packed: str) -> list[dict]:
    return json.loads(gzip.decompress(base64.b64decode(packed)))


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
               watchers: dict[Path, Watcher] | None = None, calls: bool | None = None) -> dict:
    """Every run's data; with a baseline (an index into dirs), each other run compared with it (`calls`: what
    makes their model calls comparable read from the traces too; default: with_traces)."""
    runs = [load_run(Path(d), with_traces=with_traces, watcher=(watchers or {}).get(Path(d))) for d in dirs]
    unique_names(runs)
    if baseline is not None and not 0 <= baseline < len(runs):
        baseline = None
    calls = with_traces if calls is None else calls
    comparisons = [] if baseline is None else [
        dict(compare(runs[baseline], run, force=force, calls=calls), other_index=k)
        for k, run in enumerate(runs) if k != baseline]
    for run in runs:
        for key in ("_ids", "_verdicts", "_running"):
            run.pop(key)
    return {"runs": runs, "baseline": baseline, "force": force, "comparisons": comparisons}


def _asset(name: str) -> str:
    return (HERE / "static" / name).read_text(encoding="utf-8")


# what could end the <script> element or change how it is parsed ("</script>", "<!--" with "<script"),
# written as JSON's own \\u escapes: JSON has these characters only inside strings, so the value is the same
_SCRIPT_ESCAPES = {ord(c): f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"}


def script_json(data: Any) -> str:
    """`data` as JSON that is safe inside a <script> element: ASCII (a lone surrogate is its \\u
    escape, which JSON.parse takes), and none of < > & U+2028 U+2029 unescaped."""
    return json.dumps(data, separators=(",", ":"), default=str).translate(_SCRIPT_ESCAPES)


def render_page(*, data: dict | None, mode: str, title: str) -> str:
    """The page; `data` is embedded (static report) or None (the viewer fetches /api/data)."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html", "j2"]))
    payload = None
    if data is not None:
        payload = script_json(data)
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
    write_atomic(out, html)
    return out
