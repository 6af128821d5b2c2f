"""Hostile strings in run data, rendered in Debian's Chromium: the HTML report shows every row.

Any string a run holds (an answer, an error, an id, a question, a tool result, run.json's values
and keys, report.json's keys) can be a model's or a web page's text: an nginx 502 page's `<!--`,
a `</script>`, markup, the line separators U+2028/U+2029 and lone surrogates (valid JSON escapes a
model may send). Before round 3 the embedded JSON escaped `<!--` as `<\\!--`, which is not a JSON
escape: the page's JSON.parse failed and the report showed 0 rows. No Docker: the run directory is
written here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from harness.report.html import render_page

HOSTILE = ["<!--", "-->", "</script>", "<script>document.body.dataset.pwned='1'</script>",
           "<img src=x id=pwned>", "\u2028", "\u2029", "\udc80", "\ud800", "&amp;&lt;", "<![CDATA[", "]]>",
           "\"'`${x}", "</SCRIPT >", "<!-- <script>"]
# a row cannot hold a lone surrogate (the store writes rows through pydantic, which refuses one, and
# reads a hand-written one as a damaged line, counted): traces, run.json and report.json can
IN_ROWS = [s for s in HOSTILE if s not in ("\udc80", "\ud800")]


def hostile(i: int, what: str, strings: list[str] = HOSTILE) -> str:
    """One field's value: the label, then every hostile string (a field holds them all)."""
    return f"{what} {i} " + " ".join(strings)


def in_row(i: int, what: str) -> str:
    return hostile(i, what, IN_ROWS)


def hostile_run(root: Path, n: int) -> tuple[Path, list[str]]:
    root.mkdir(parents=True)
    (root / "traces").mkdir()
    ids = [in_row(i, "task") for i in range(n)]
    (root / "selected.json").write_text(json.dumps({iid: 1 + i % 3 for i, iid in enumerate(ids)}))
    (root / "run.json").write_text(json.dumps({
        "dataset": hostile(0, "dataset"), "model": hostile(0, "model"), "agent": hostile(0, "agent"),
        "limits": {"max_steps": 30, hostile(0, "limit key"): hostile(0, "limit value")},
        "scorers": ["gaia"], hostile(0, "run key"): hostile(0, "run value")}))
    lines = []
    for i, iid in enumerate(ids):
        trace = f"traces/t{i}.jsonl"
        errored = i % 3 == 2
        lines.append(json.dumps({
            "instance_id": iid, "status": "error" if errored else "ok", "level": 1 + i % 3,
            "error_kind": "model" if errored else None, "error": in_row(i, "error") if errored else None,
            "answer": None if errored else in_row(i, "answer"), "answer_source": "none" if errored else "solution_tag",
            "target": in_row(i, "target"), "correct": None if errored else i % 2 == 0,
            "scores": {} if errored else {"gaia": {"scorer": "gaia", "correct": i % 2 == 0, "value": 1.0,
                                                   "explanation": in_row(i, "explanation")}},
            "tool_calls": [in_row(i, "tool")], "trace": trace,
            "env_outcomes": {in_row(i, "env"): {in_row(i, "outcome"): 1}}}))
        events = [{"t": 0.0, "type": "task", "task": hostile(i, "question")},
                  {"t": 0.1, "type": "tool_result", "name": hostile(i, "tool"), "content": hostile(i, "result")},
                  {"t": 0.2, "type": hostile(i, "event type"), hostile(i, "event key"): hostile(i, "event value")},
                  {"t": 0.3, "type": "message", "source": "assistant", "content": hostile(i, "message")}]
        (root / trace).write_text("".join(json.dumps(e) + "\n" for e in events))
    (root / "output.jsonl").write_text("".join(line + "\n" for line in lines))
    report = {"n_selected": n, hostile(0, "report key"): hostile(0, "report value")}
    (root / "report.json").write_text(json.dumps(report))
    return root, ids


def test_hostile_strings_in_every_field_show_every_row(tmp_path, page, reliability):
    started = time.monotonic()
    n = 9
    run, ids = hostile_run(tmp_path / "run <!-- <script> &amp; \u2028", n)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(run), "--html", "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    script = html.split('<script id="report-data" type="application/json">', 1)[1].split("</script>", 1)[0]
    for bad in ("<", ">", "\u2028", "\u2029"):
        assert bad not in script, bad  # every one escaped inside the embedded JSON
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    assert not page.errors, page.errors
    assert "run <!-- <script> &amp;" in page.inner_text("h1")  # the run's name in the title
    shown = int(page.get_attribute("#row-count", "data-shown"))
    assert shown == n
    assert sorted(page.locator("#rows tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)")) == sorted(ids)
    text = page.inner_text("body")
    for field in ("answer 0", "target 1", "dataset 0", "limit value 0", "limit key 0"):
        assert field + " <!-- -->" in text, field  # shown as text, the markup unrendered
    folded = page.text_content("#overview")  # run.json and report.json's other keys, folded away
    assert "report key 0 <!-- -->" in folded and "run value 0 <!-- -->" in folded
    assert page.locator("#pwned").count() == 0 and page.evaluate("document.body.dataset.pwned") is None
    for opened, iid in enumerate((ids[0], ids[2])):  # a trace's strings too (the gzipped embedded trace)
        page.locator("#rows tbody tr").nth(ids.index(iid)).click()
        if opened:  # the trace opened before leaves the panel at once (it was read here while the next one loaded)
            assert "question 0 <!--" not in page.inner_text("#trace")
        page.wait_for_function("id => document.querySelector('#trace').dataset.id === id", arg=iid, timeout=20_000)
        trace = page.inner_text("#trace")
        assert f"question {ids.index(iid)} <!--" in trace and "event value" in trace
    assert "error 2 <!-- --> </script>" in trace  # the errored row's error, in its summary
    assert page.locator("#pwned").count() == 0 and page.evaluate("document.body.dataset.pwned") is None
    assert not page.errors, page.errors
    assert set(page.requests) == {out.as_uri()}  # no injected element asked for anything
    reliability.record("HTML report: `<!--`, `</script>`, markup, U+2028/9, lone surrogates in every field",
                       f"{shown} of {n} rows shown, no markup rendered, no script error", started=started)


def test_the_embedded_json_escapes_what_could_end_or_change_the_script():
    page = render_page(data={"s": "a<!--b</script>c<d>e&f\u2028g\u2029h\udc80"}, mode="static", title="t")
    payload = page.split('type="application/json">', 1)[1].split("</script>", 1)[0]
    assert json.loads(payload) == {"s": "a<!--b</script>c<d>e&f\u2028g\u2029h\udc80"}
    assert not set("<>&\u2028\u2029") & set(payload)
