"""`harness report DIR --html`: one self-contained page, driven in Debian's Chromium (Playwright).

The run directories are synthetic (rows, traces, run.json, selected.json, report.json written
here), so these tests need no Docker and take seconds. `make_run_dir` is shared with
test_viewer.py and bench/viewer.py; `browser` and `page` are tests/helpers/browser.py's.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.report import html as pages
from harness.results.store import latest_by_key, read_rows
from tests.test_gaia2_report import hand_run

ROOT = Path(__file__).resolve().parents[1]
# a 1x1 PNG: a screenshot the web environment saved beside the trace
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
                       "AAAABJRU5ErkJggg==")


def outcome(i: int) -> tuple[str, bool | None, str | None]:
    """The synthetic run's instance i: (status, correct, error_kind)."""
    if i % 6 == 5:
        return "error", None, ("model" if i % 12 == 5 else "infra")
    if i % 6 == 4:
        return "limit", False, None
    return "ok", i % 2 == 0, None


def make_run_dir(root: Path, n: int, *, flip: frozenset[int] = frozenset(), big_output: int = 0,
                 shots: bool = True, traces: bool = True, stale_first: bool = True) -> Path:
    """A run directory of n instances `task-0000`…; `flip` inverts the verdict of those ok/limit
    instances (a second run to compare); the first instance also has an older errored row."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "traces").mkdir(exist_ok=True)
    ids = [f"task-{i:04d}" for i in range(n)]
    selected = {iid: i % 3 + 1 for i, iid in enumerate(ids)}
    (root / "selected.json").write_text(json.dumps(selected))
    (root / "run.json").write_text(json.dumps({"dataset": "synthetic", "model": "fake-model", "agent": "assistant",
                                                "limits": {"max_steps": 30}, "scorers": ["gaia"]}, indent=2))
    lines = []
    if stale_first and n:
        lines.append(json.dumps({"instance_id": ids[0], "status": "error", "error_kind": "infra",
                                 "error": "old attempt",
                                 "level": 1, "attempt": 1}))
    for i, iid in enumerate(ids):
        status, correct, kind = outcome(i)
        if i in flip and status != "error":
            correct = not correct
        trace = f"traces/{iid}-a1.jsonl"
        row = {"instance_id": iid, "attempt": 1, "status": status, "error_kind": kind,
               "error": f"{kind} failure in {iid}: connection reset" if kind else None,
               "limit": "max_steps" if status == "limit" else None,
               "answer": None if kind else f"answer {i}", "answer_source": "none" if kind else "solution_tag",
               "target": f"answer {i}" if correct else f"target {i}", "level": i % 3 + 1, "correct": correct,
               "scores": {} if kind else {"gaia": {"scorer": "gaia", "correct": bool(correct),
                                                   "value": float(bool(correct)),
                                                   "explanation": "string: equal" if correct
                                                   else "string: normalized text differs"}},
               "usage": {"prompt_tokens": 1000 + 37 * i, "completion_tokens": 100 + i, "llm_calls": 3,
                         "cost": 0.001 * i},
               "steps": 3, "tool_calls": ["run_python"], "user_replies": 0, "duration_s": 1.0 + (i % 7),
               "started_at": "", "finished_at": "", "sandbox": None, "trace": trace,
               "env_outcomes": {"code": {"ok": 2, **({"timeout": 1} if i % 4 == 3 else {})}}}
        lines.append(json.dumps(row))
        if not traces:
            continue
        events = [
            {"t": 0.0, "type": "task", "task": f"Question {i}: what is the answer?"},
            {"t": 0.01, "type": "system_prompt", "source": "assistant", "content": f"SYSTEM PROMPT of {iid}"},
            {"t": 0.01, "type": "tools", "tools": [{"type": "function", "function": {
                "name": "run_python", "description": "Run Python.", "parameters": {"type": "object"}}}]},
            {"t": 0.02, "type": "model_call", "model": "fake-model", "seconds": 0.5,
             "usage": {"prompt_tokens": 10, "completion_tokens": 5},
             "content": None, "tool_calls": [{"name": "run_python", "arguments": {"code": "print(1)"}}],
             "messages": [{"role": "system", "content": "SYSTEM"}, {"role": "user", "content": f"Question {i}"}]},
            {"t": 0.03, "type": "tool_call", "source": "assistant", "name": "run_python",
             "arguments": {"code": "print(1)"}, "call_id": "c1"},
            {"t": 0.5, "type": "env", "env": "code", "action": "run_python", "args": {"code": "print(1)"},
             "outcome": "ok",
             "seconds": 0.4, "result": "1\n" + "x" * big_output},
            {"t": 0.6, "type": "tool_result", "name": "run_python", "call_id": "c1",
             "content": "exit code: 0\nstdout:\n1\n" + "y" * big_output},
        ]
        if shots and i == 1:
            shot_dir = root / "traces" / f"{iid}-a1-shots"
            shot_dir.mkdir(exist_ok=True)
            (shot_dir / "shot-1.png").write_bytes(PNG)
            events.append({"t": 0.7, "type": "env", "env": "web", "action": "screenshot", "args": {}, "outcome": "ok",
                           "seconds": 0.1,
                           "result": "Screenshot saved to the trace (shot-1.png). Current page: http://shop.gaia.test/"})
        if kind:
            events.append({"t": 0.8, "type": "error", "kind": kind, "message": f"{kind} failure in {iid}",
                           "traceback": "Traceback ..."})
        else:
            if status == "limit":
                events.append({"t": 0.8, "type": "limit", "limit": "max_steps", "detail": "30 model calls"})
            events.append({"t": 0.9, "type": "message", "source": "assistant",
                           "content": f"<solution>answer {i}</solution>"})
            if i % 2 == 0:  # the verdict event, where the harness writes it
                events.append({"t": 1.0, "type": "verdict", "source": "run", "status": status, "answer": row["answer"],
                               "answer_source": row["answer_source"], "target": row["target"], "correct": bool(correct),
                               "scores": {"gaia": {"correct": bool(correct), "value": float(bool(correct)),
                                                   "explanation": row["scores"]["gaia"]["explanation"],
                                                   "details": {"kind": "string",
                                                               "compared": [f"answer {i}", row["target"]]}}}})
        (root / trace).write_text("".join(json.dumps(e) + "\n" for e in events))
    (root / "output.jsonl").write_text("".join(line + "\n" for line in lines))
    (root / "report.json").write_text(json.dumps({"n_selected": n, "leaked_containers": 0, "future_key": {"a": 1},
                                                  "scorers": {"gaia": {"n": n, "correct": 1, "accuracy": 1 / max(n, 1),
                                                                       "ci95": [0.0, 0.5]}},
                                                  "ids": {"passed": ids[:1]}}))
    return root


def expected_latest(n: int) -> int:
    return n


def shown(pg) -> int:
    return int(pg.get_attribute("#row-count", "data-shown"))


def report(dirs: list[Path], out: Path) -> Path:
    result = CliRunner().invoke(app, ["report", *map(str, dirs), "--html", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.exists()
    return out


def open_report(pg, path: Path) -> None:
    pg.goto(path.as_uri())
    pg.wait_for_selector("body[data-ready='1']")


def test_summary_and_compare_numbers(tmp_path):
    a = make_run_dir(tmp_path / "a", 12)
    b = make_run_dir(tmp_path / "b", 12, flip=frozenset({0, 1, 2, 3}))
    data = pages.build_data([a, b], with_traces=False)
    run = data["runs"][0]
    assert len(run["rows"]) == 12  # the older errored row of task-0000 gives way to the latest
    assert run["summary"]["n_correct"] == sum(1 for i in range(12) if outcome(i)[1] is True)
    assert run["summary"]["future_key"] == {"a": 1}  # report.json keys are kept
    c = data["comparisons"][0]
    # flipped: 0 and 2 were correct (broken), 1 and 3 were wrong (fixed)
    assert c["fixed"] == ["task-0001", "task-0003"] and c["broken"] == ["task-0000", "task-0002"]
    assert c["delta"] == 0 and c["delta_ci95"][0] < 0 < c["delta_ci95"][1]
    assert c["same_dataset"] is True
    run_json = json.loads((b / "run.json").read_text())
    (b / "run.json").write_text(json.dumps({**run_json, "dataset_fingerprint": "other"}))
    (a / "run.json").write_text(json.dumps({**run_json, "dataset_fingerprint": "one"}))
    other = pages.build_data([a, b], with_traces=False)["comparisons"][0]
    assert other["same_dataset"] is False
    assert other["delta"] is None and not other["compared"]  # another dataset: not compared unless asked


def test_embedded_traces_are_packed_and_cut(tmp_path):
    run = make_run_dir(tmp_path / "r", 2, big_output=100_000)
    data = pages.load_run(run, with_traces=True)
    events = pages.unpack_trace(data["traces"]["task-0001"])
    assert events[1] == {"t": 0.01, "type": "system_prompt", "source": "assistant",
                         "content": "SYSTEM PROMPT of task-0001"}
    result = next(e for e in events if e["type"] == "tool_result")
    assert len(result["content"]) < pages.MAX_TEXT + 100
    assert len(data["traces"]["task-0001"]) < 5_000  # gzip takes the repeated filler


def test_html_report_table_filters_and_trace(tmp_path, page):
    n = 12
    run = make_run_dir(tmp_path / "run-a", n)
    out = report([run], tmp_path / "report.html")
    open_report(page, out)
    assert shown(page) == len(latest_by_key(read_rows(run / "output.jsonl"))) == n
    assert page.locator("#rows tbody tr").count() == n
    assert page.locator("#chart-accuracy svg").count() == 1

    page.select_option("#f-status", "error")
    errors = [i for i in range(n) if outcome(i)[0] == "error"]
    assert shown(page) == len(errors)
    page.select_option("#f-error", "model")
    assert shown(page) == sum(1 for i in errors if outcome(i)[2] == "model")
    page.select_option("#f-error", "")
    page.select_option("#f-status", "")
    page.select_option("#f-correct", "correct")
    assert shown(page) == sum(1 for i in range(n) if outcome(i)[1] is True)
    page.select_option("#f-correct", "")
    page.select_option("#f-level", "2")
    assert shown(page) == sum(1 for i in range(n) if i % 3 + 1 == 2)
    page.select_option("#f-level", "")
    page.fill("#f-text", "task-0007")
    assert shown(page) == 1
    page.fill("#f-text", "")
    assert shown(page) == n

    # sort by tokens, descending on the second click
    page.click("#rows th:has-text('tokens')")
    page.click("#rows th:has-text('tokens')")
    assert page.locator("#rows tbody tr").first.get_attribute("data-id") == f"task-{n - 1:04d}"

    # an errored instance: why it failed is on the page
    page.click("#rows tbody tr[data-id='task-0005']")
    page.wait_for_selector("#trace .ev-error")  # traces are inflated on click
    trace = page.locator("#trace")
    assert "SYSTEM PROMPT of task-0005" in trace.inner_text()
    assert "model failure in task-0005" in trace.inner_text()
    assert page.locator("#trace .ev-error").count() == 1
    # an instance with a verdict event
    page.click("#rows tbody tr[data-id='task-0002']")
    page.wait_for_selector("#trace .ev-verdict")
    assert "SYSTEM PROMPT of task-0002" in trace.inner_text()
    assert page.locator("#trace .ev-verdict").count() == 1
    assert "compared" in page.inner_text("#trace .ev-verdict")  # what the scorer compared
    assert page.locator("#chart-scorers svg").count() == 1
    assert page.locator("#env-outcomes").count() == 1
    assert page.locator("#trace .ev-model_call details").count() == 1  # the messages sent
    assert "1 offered" in page.inner_text("#trace .ev-tools") and "run_python" in page.inner_text(
        "#trace .ev-tools summary")  # the tools the model was offered, named
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)  # a test artifact

    assert not page.errors
    assert all(u.startswith("file://") for u in page.requests), page.requests
    assert set(page.requests) == {out.as_uri()}  # nothing but the file itself


def test_html_report_comparison(tmp_path, page):
    a = make_run_dir(tmp_path / "base", 12)
    b = make_run_dir(tmp_path / "new", 12, flip=frozenset({0, 1, 2, 3, 5}))  # 5 errored: stays failed
    out = report([a, b], tmp_path / "cmp.html")
    open_report(page, out)
    assert page.text_content(".fixed-ids").split() == ["task-0001", "task-0003"]
    assert page.text_content(".broken-ids").split() == ["task-0000", "task-0002"]
    assert page.inner_text("#cmp-table .fixed-count") == "2"
    page.click("#run-tabs button:has-text('new')")
    page.select_option("#f-compare", "fixed")
    shown_ids = page.locator("#rows tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)")
    assert sorted(shown_ids) == ["task-0001", "task-0003"]
    page.select_option("#f-compare", "broken")
    assert shown(page) == 2
    page.screenshot(path=str(tmp_path / "comparison.png"), full_page=True)
    assert not page.errors
    assert set(page.requests) == {out.as_uri()}


def test_html_report_truncates_huge_outputs(tmp_path, page):
    run = make_run_dir(tmp_path / "big", 6, big_output=2_000_000)
    out = report([run], tmp_path / "big.html")
    assert out.stat().st_size < 400_000  # 6 traces of 4 MB of tool output each
    open_report(page, out)
    page.click("#rows tbody tr[data-id='task-0001']")
    page.wait_for_selector("#trace .ev-tool_result")
    assert "more characters left out of the report" in page.inner_text("#trace")
    # a screenshot is named in the static report (the viewer shows the image)
    assert "shot-1.png" in page.inner_text("#trace")


RATIONALE = "sent to <b id='injected'>Bob</b> & not to Alice"  # ARE's words, markup in them


def gaia2_run_dir(tmp_path: Path) -> Path:
    """test_gaia2_report's hand-written Gaia2 run (3 epochs), each verdict as ARE's judge gives it: the hard judge,
    the turns, two oracle actions (one matched, one not); e2's failed second epoch gives RATIONALE."""
    run = hand_run(tmp_path)
    rows = [json.loads(line) for line in (run / "output.jsonl").read_text().splitlines()]
    for row in rows:
        for verdict in row["verdicts"].values():
            verdict.update(judge="hard", turns=1, turns_done=1, oracle_actions=[
                {"turn": 0, "oracle_event_id": "oracle-send", "tool": "Emails__send_email", "judged": True,
                 "matched": True, "agent_event_id": "agent-7"},
                {"turn": 0, "oracle_event_id": "oracle-reply", "tool": "Messaging__reply", "judged": True,
                 "matched": False, "agent_event_id": None}])
    assert (rows[4]["instance_id"], rows[4]["epoch"], rows[4]["correct"]) == ("e2", 2, False)
    rows[4]["verdicts"]["gaia2"]["rationale"] = RATIONALE
    (run / "output.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return run


def assert_gaia2_shown(pg) -> None:
    """The page (report or viewer) shows the Gaia2 figures and, for e2's failed epoch, ARE's verdict."""
    figures = pg.inner_text("#gaia2")
    assert "Gaia2: 33.3%, the equal-weight mean of 2 capabilities' accuracies" in figures  # (4/6 + 0/2) / 2
    assert "capability execution" in figures and "variant agent2agent" in figures
    assert "pass@3" in figures and "pass^3" in figures and "not judged" in figures
    execution = pg.inner_text("#gaia2-figures tr:has-text('capability execution')").split("\t")
    assert execution[1:8] == ["2", "4/6", "66.7%", "100.0%", "50.0%", "2", "1"]
    search = pg.inner_text("#gaia2-figures tr:has-text('capability search')").split("\t")
    assert search[8:10] == ["1", "1"]  # one run never ran, one ARE could not judge
    assert pg.locator("#overview .breakdown").count() == 0  # capability/variant: the Gaia2 table says them
    warned = pg.inner_text("#gaia2-judge-warning")  # every verdict here is the hard judge's
    assert "Not comparable to ARE's leaderboard" in warned and "message texts were not compared" in warned
    pg.click("#rows tbody tr[data-id='e2 #e2']")
    pg.wait_for_selector("#trace .gaia2-verdict")
    verdict = pg.inner_text("#trace .gaia2-verdict")
    assert "ARE's verdict: fail" in verdict and "message texts are not compared" in verdict
    assert RATIONALE in verdict and pg.locator("#injected").count() == 0  # shown as text, never as markup
    assert pg.locator("#trace .oracle-actions tr.matched").count() == 1
    unmatched = pg.inner_text("#trace .oracle-actions tr.unmatched")
    assert "Messaging__reply" in unmatched and "not matched" in unmatched
    assert "agent-7" in pg.inner_text("#trace .oracle-actions tr.matched")
    assert not pg.errors


def test_html_report_shows_gaia2s_figures_and_ares_verdicts(tmp_path, page):
    run = gaia2_run_dir(tmp_path)
    out = report([run], tmp_path / "gaia2.html")
    assert "<b id='injected'>" not in out.read_text()  # the embedded data escapes it too
    open_report(page, out)
    assert_gaia2_shown(page)
    page.screenshot(path=str(tmp_path / "gaia2.png"), full_page=True)


def test_report_refuses_a_non_run_dir(tmp_path):
    result = CliRunner().invoke(app, ["report", str(tmp_path), "--html"])
    assert result.exit_code == 2


@pytest.mark.docker
def test_report_of_a_real_smoke_subset_explains_the_failures(tmp_path, page):
    """The bundled smoke set's two failing level-3 instances, one passing one, real sandboxes:
    the page alone tells why each failed (the answer, the target and the scorer's words)."""
    from tests.helpers.e2e import containers_of, explain, harness, out_dir

    smoke = ROOT / "datasets" / "gaia-smoke"
    failing = ["964d85c4-677b-56b1-946d-d39b4af02e50", "5a79f795-8c1f-5451-9f49-e9fd38daa1f9"]
    ids = [*failing, "c4eea2af-0a09-5074-981e-18781a06799d"]
    out = out_dir(tmp_path, "html")
    proc = harness("run", "--dataset", smoke, "--model", "replay", "--website", smoke / "website",
                   "--output-dir", out, "--workers", "2", "--ids", ",".join(ids))
    assert proc.returncode == 0, explain(proc)
    assert not containers_of(out)
    html = report([out], tmp_path / "smoke.html")
    open_report(page, html)
    assert shown(page) == 3
    page.select_option("#f-correct", "wrong")
    assert sorted(page.locator("#rows tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)")) == sorted(failing)
    for iid in failing:
        page.click(f"#rows tbody tr[data-id='{iid}']")
        page.wait_for_selector(f"#trace .summary-box:has-text('{iid}') ~ .ev-task")
        box = page.inner_text("#trace .summary-box")
        assert "scorer gaia: wrong" in box and "target" in box, box
        assert page.locator("#trace .ev-system_prompt").count() >= 1
        assert page.locator("#trace .ev-task").count() == 1
    page.screenshot(path=str(tmp_path / "smoke.png"), full_page=True)
    assert set(page.requests) == {html.as_uri()}
    assert not page.errors


def test_report_without_html_prints_the_numbers(tmp_path):
    a = make_run_dir(tmp_path / "a", 12)
    b = make_run_dir(tmp_path / "b", 12, flip=frozenset({0, 1, 2, 3}))
    result = CliRunner().invoke(app, ["report", str(a), str(b)])
    assert result.exit_code == 0, result.output
    assert "4/12 = 33.3%" in result.output  # each run's table, as the run printed it
    assert "b vs a: 33.3% -> 33.3% over 12 paired instances, delta +0.0% [" in result.output
    assert "fixed 2, broken 2" in result.output
