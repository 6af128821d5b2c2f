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
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
from pathlib import Path
from typing import Any

from harness.results.layout import RunDir

HERE = Path(__file__).parent
Z95 = 1.959963984540054
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


def epoch_summary(rows: list[dict], selected: dict, report: dict | None, run: dict) -> dict:
    """summarize() for a run with epochs: the headline and per-level figures of build_report (the
    run's reducers), counts of outcomes over every instance run."""
    from harness.report.build import build_report
    from harness.results.model import ResultRow

    parsed = []
    for raw in rows:
        try:
            parsed.append(ResultRow.model_validate(raw))
        except ValueError:
            continue
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
                                                         "errors_by_kind", "epochs"})),
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


def wilson(correct: int, n: int) -> tuple[float, float]:
    if n <= 0:
        return (0.0, 1.0)
    p = correct / n
    z = Z95
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)))


def _level(row: dict, selected: dict) -> str:
    level = row.get("level")
    if level is None:
        level = selected.get(str(row.get("instance_id")))
    return "unknown" if level is None else str(level)


def summarize(rows: list[dict], selected: dict, report: dict | None) -> dict:
    """Accuracy (overall, per level, Wilson 95% CI) over the selected ids (all rows' ids when
    nothing was selected), outcomes and error kinds, from the latest rows: fresh while a run
    writes. Keys of report.json this does not compute are kept."""
    ids = list(selected) or [str(r["instance_id"]) for r in rows]
    by_id = {str(r["instance_id"]): r for r in rows}
    per_level: dict[str, list[int]] = {}
    outcomes: dict[str, int] = {}
    errors: dict[str, int] = {}
    n_correct = 0
    for iid in ids:
        row = by_id.get(iid)
        lvl = _level(row, selected) if row else ("unknown" if selected.get(iid) is None else str(selected[iid]))
        ok = bool(row and row.get("status") != "error" and row.get("correct") is True)
        n_correct += ok
        b = per_level.setdefault(lvl, [0, 0])
        b[0] += 1
        b[1] += ok
        outcome = "missing" if row is None else str(row.get("status"))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if row is not None and row.get("status") == "error":
            kind = str(row.get("error_kind") or "unknown")
            errors[kind] = errors.get(kind, 0) + 1
    n = len(ids)
    out = dict(report or {})
    out.update(
        n_selected=n,
        n_rows=len(rows),
        n_correct=n_correct,
        accuracy=n_correct / n if n else 0.0,
        ci95=list(wilson(n_correct, n)),
        per_level={
            k: {"n": b[0], "correct": b[1], "accuracy": b[1] / b[0] if b[0] else 0.0, "ci95": list(wilson(b[1], b[0]))}
            for k, b in sorted(per_level.items(), key=lambda kv: (kv[0] == "unknown", kv[0]))
        },
        outcomes=outcomes,
        errors_by_kind=dict(sorted(errors.items(), key=lambda kv: -kv[1])),
    )
    return out


def load_run(root: Path, *, with_traces: bool) -> dict:
    rd = RunDir(Path(root))
    selected = _read_json(rd.selected)
    if isinstance(selected, list):
        selected = {str(i): None for i in selected}
    selected = selected if isinstance(selected, dict) else {}
    run = _read_json(rd.run_json) or {}
    epochs = int(run.get("epochs") or 1) if isinstance(run, dict) else 1
    raw = read_rows(rd.output)
    rows = latest_rows(raw, epochs)
    report = _read_json(rd.report)
    report = report if isinstance(report, dict) else None
    data = {
        "name": rd.root.name,
        "path": str(rd.root),
        "run": run,
        "selected": selected,
        "rows": rows,
        "summary": summarize(rows, selected, report) if epochs == 1 else epoch_summary(raw, selected, report, run),
    }
    if with_traces:
        # each trace gzipped and base64'd: the page inflates one when its row opens
        # (DecompressionStream), so a large run's file stays small and parses fast
        data["traces"] = {
            str(r["instance_id"]): pack_trace(read_trace(rd.root / r["trace"], truncate=True))
            for r in rows
            if r.get("trace") and _inside(rd.root, rd.root / r["trace"]) and (rd.root / r["trace"]).exists()
        }
    return data


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


def _passed(row: dict | None) -> bool:
    return bool(row and row.get("status") != "error" and row.get("correct") is True)


def compare(base: dict, other: dict) -> dict:
    """Per instance fixed (wrong in base, right in other) / broken (right, then wrong) /
    unchanged, over the ids both runs selected (or have rows for), and the accuracy delta
    with a 95% CI (Wald, for two independent proportions)."""
    b_rows = {str(r["instance_id"]): r for r in base["rows"]}
    o_rows = {str(r["instance_id"]): r for r in other["rows"]}
    b_ids = list(base["selected"]) or list(b_rows)
    o_ids = set(other["selected"]) or set(o_rows)
    common = [i for i in b_ids if i in o_ids]
    fixed, broken, same_pass, same_fail = [], [], [], []
    for iid in common:
        before, after = _passed(b_rows.get(iid)), _passed(o_rows.get(iid))
        (fixed if after and not before else broken if before and not after else same_pass if after else same_fail).append(iid)
    n = len(common)
    p1 = sum(_passed(b_rows.get(i)) for i in common) / n if n else 0.0
    p2 = sum(_passed(o_rows.get(i)) for i in common) / n if n else 0.0
    delta = p2 - p1
    # paired difference: the variance of the per-instance difference, the right CI for the same ids
    if n:
        diffs = [(_passed(o_rows.get(i)) - _passed(b_rows.get(i))) for i in common]
        var = sum((d - delta) ** 2 for d in diffs) / max(n - 1, 1)
        half = Z95 * math.sqrt(var / n)
    else:
        half = 1.0
    fp = [(r.get("run") or {}).get("dataset_fingerprint") for r in (base, other)]
    return {
        "base": base["name"],
        "other": other["name"],
        # False when both run.json name a dataset fingerprint and they differ: a comparison of apples and pears
        "same_dataset": not (fp[0] and fp[1] and fp[0] != fp[1]),
        "n": n,
        "base_accuracy": p1,
        "other_accuracy": p2,
        "delta": delta,
        "delta_ci95": [delta - half, delta + half],
        "fixed": fixed,
        "broken": broken,
        "unchanged_pass": same_pass,
        "unchanged_fail": same_fail,
    }


def unique_names(runs: list[dict]) -> None:
    seen: dict[str, int] = {}
    for run in runs:
        name = run["name"]
        if name in seen:
            seen[name] += 1
            run["name"] = f"{name} ({seen[name]})"
        else:
            seen[name] = 1


def build_data(dirs: list[Path], *, with_traces: bool) -> dict:
    runs = [load_run(Path(d), with_traces=with_traces) for d in dirs]
    unique_names(runs)
    return {"runs": runs, "comparisons": [compare(runs[0], r) for r in runs[1:]]}


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


def write_html_report(dirs: list[Path], out: Path) -> Path:
    data = build_data(dirs, with_traces=True)
    title = "harness report: " + ", ".join(r["name"] for r in data["runs"])
    html = render_page(data=data, mode="static", title=title)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    return out
