"""`harness view`: the local web app, driven in Debian's Chromium (Playwright): rows, lazy traces
with screenshots, comparison, live updates while output.jsonl grows, nothing fetched off 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from harness.report import html as pages
from harness.report.view import ViewServer
from tests.test_html_report import browser, make_run_dir, outcome, page, shown  # noqa: F401  (fixtures)


def local_only(requests: list[str], url: str) -> bool:
    return all(u.startswith(url) for u in requests)


def wait_ready(pg, url: str) -> None:
    pg.goto(url)
    pg.wait_for_selector("body[data-ready='1']")


def test_viewer_rows_lazy_trace_and_screenshot(tmp_path, page):
    run = make_run_dir(tmp_path / "run-a", 12)
    with ViewServer([run]) as server:
        wait_ready(page, server.url)
        assert shown(page) == len(pages.latest_rows(pages.read_rows(run / "output.jsonl"))) == 12
        assert not any("/api/trace" in u for u in page.requests)  # traces load per click
        page.select_option("#f-status", "error")
        assert shown(page) == sum(1 for i in range(12) if outcome(i)[0] == "error")
        page.select_option("#f-status", "")
        page.click("#rows tbody tr[data-id='task-0001']")
        page.wait_for_selector("#trace .ev-system_prompt")
        assert "SYSTEM PROMPT of task-0001" in page.inner_text("#trace")
        img = page.locator("#trace img.shot")
        img.wait_for()
        page.wait_for_function("() => document.querySelector('#trace img.shot').naturalWidth > 0")
        page.click("#rows tbody tr[data-id='task-0004']")
        page.wait_for_selector("#trace .ev-limit")
        page.click("#rows tbody tr[data-id='task-0002']")
        page.wait_for_selector("#trace .ev-verdict")
        page.screenshot(path=str(tmp_path / "viewer.png"), full_page=True)
        assert sum("/api/trace" in u for u in page.requests) == 3
        assert not page.errors
        assert local_only(page.requests, server.url), page.requests


def test_viewer_refuses_paths_outside_the_run(tmp_path):
    run = make_run_dir(tmp_path / "run-a", 3)
    (tmp_path / "secret.png").write_bytes(b"x")
    with ViewServer([run]) as server:
        for q in ("/api/shot?run=0&trace=traces/task-0001-a1.jsonl&name=../../../secret.png",
                  "/api/shot?run=0&trace=../secret.jsonl&name=secret.png", "/api/trace?run=7&id=x"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(server.url.rstrip("/") + q, timeout=5)
            assert err.value.code == 404


def test_viewer_comparison(tmp_path, page):
    a = make_run_dir(tmp_path / "base", 12)
    b = make_run_dir(tmp_path / "new", 12, flip=frozenset({0, 1, 2, 3}))
    with ViewServer([a, b]) as server:
        wait_ready(page, server.url)
        assert page.text_content(".fixed-ids").split() == ["task-0001", "task-0003"]
        assert page.text_content(".broken-ids").split() == ["task-0000", "task-0002"]
        page.click("#run-tabs button:has-text('new')")
        page.select_option("#f-compare", "broken")
        assert shown(page) == 2
        page.click("#rows tbody tr[data-id='task-0000']")
        page.wait_for_selector("#trace .ev-system_prompt")  # the trace of the shown run
        assert local_only(page.requests, server.url)


def test_viewer_live_update(tmp_path, page):
    run = make_run_dir(tmp_path / "running", 5)
    with ViewServer([run]) as server:
        wait_ready(page, server.url)
        assert shown(page) == 5
        row = json.loads((run / "output.jsonl").read_text().splitlines()[-1])
        row.update(instance_id="task-new", status="error", error_kind="agent", error="the agent crashed", trace=None)
        with open(run / "output.jsonl", "a") as fh:  # what the running harness does
            fh.write(json.dumps(row) + "\n")
        page.wait_for_function("() => document.querySelector('#row-count').dataset.total === '6'", timeout=10_000)
        assert page.locator("#rows tbody tr[data-id='task-new']").count() == 1
        assert "updated" in page.inner_text("#live-status")
        # a later row of the same instance replaces it (the latest row wins)
        row.update(status="ok", error_kind=None, error=None, correct=True)
        with open(run / "output.jsonl", "a") as fh:
            fh.write(json.dumps(row) + "\n")
        page.wait_for_function(
            "() => document.querySelector(\"#rows tbody tr[data-id='task-new'] td.st-ok\") !== null", timeout=10_000)
        assert shown(page) == 6
        assert local_only(page.requests, server.url)


def test_view_command_prints_the_url(tmp_path):
    run = make_run_dir(tmp_path / "r", 2)
    proc = subprocess.Popen([sys.executable, "-m", "harness", "view", str(run), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, line
        url = line.split()[2]
        with urllib.request.urlopen(url + "api/data", timeout=10) as resp:
            assert len(json.load(resp)["runs"][0]["rows"]) == 2
    finally:
        proc.terminate()
        proc.wait(timeout=10)
