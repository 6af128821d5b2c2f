"""`harness view`: the local web app, driven in Debian's Chromium (Playwright): rows, lazy traces
with screenshots, comparison, live updates while output.jsonl grows, nothing fetched off 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from harness.report.view import ViewServer
from harness.results.store import latest_by_key, read_rows
from tests.test_html_report import assert_gaia2_shown, gaia2_run_dir, make_run_dir, outcome, shown


def local_only(requests: list[str], url: str) -> bool:
    return all(u.startswith(url) for u in requests)


def wait_ready(pg, url: str) -> None:
    pg.goto(url)
    pg.wait_for_selector("body[data-ready='1']")


def test_viewer_rows_lazy_trace_and_screenshot(tmp_path, page):
    run = make_run_dir(tmp_path / "run-a", 12)
    with ViewServer([run]) as server:
        wait_ready(page, server.url)
        assert shown(page) == len(latest_by_key(read_rows(run / "output.jsonl"))) == 12
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


def test_viewer_shows_gaia2s_figures_and_ares_verdicts(tmp_path, page):
    run = gaia2_run_dir(tmp_path)
    with ViewServer([run]) as server:
        wait_ready(page, server.url)
        assert_gaia2_shown(page)
        assert local_only(page.requests, server.url)


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
        page.wait_for_function("() => document.querySelector('#row-count').dataset.total === '6'", timeout=60_000)
        assert page.locator("#rows tbody tr[data-id='task-new']").count() == 1
        assert "updated" in page.inner_text("#live-status")
        # a later row of the same instance replaces it (the latest row wins)
        row.update(status="ok", error_kind=None, error=None, correct=True)
        with open(run / "output.jsonl", "a") as fh:
            fh.write(json.dumps(row) + "\n")
        page.wait_for_function(
            "() => document.querySelector(\"#rows tbody tr[data-id='task-new'] td.st-ok\") !== null", timeout=60_000)
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


# ---------- the live state: running instances, accuracy so far, runs that appear ----------

def in_flight(run, iid: str, keep: int) -> None:
    """Make the synthetic run look mid-run: only the first `keep` rows written, `iid`'s trace being
    written since the run started (no verdict yet), and the run's lock held by the caller."""
    lines = (run / "output.jsonl").read_text().splitlines()
    (run / "output.jsonl").write_text("\n".join(lines[: 1 + keep]) + "\n")  # the stale first row + keep rows
    trace = run / f"traces/{iid}-a1.jsonl"
    events = [json.loads(x) for x in trace.read_text().splitlines()]
    trace.write_text("".join(json.dumps(e) + "\n" for e in events if e["type"] not in ("verdict", "message")))
    # a run names its traces RunDir.trace_name: the synthetic ones are renamed to match
    from harness.results.layout import RunDir

    real = run / RunDir(run).trace_name(iid, 1)
    trace.rename(real)


def test_live_state_of_a_run_directory(tmp_path):
    from filelock import FileLock

    from harness.report.live import Watcher, is_live
    from harness.results.layout import RunDir

    run = make_run_dir(tmp_path / "r", 4)
    layout = RunDir(run)
    ids = [f"task-{i:04d}" for i in range(4)] + ["odd-e2"]
    assert is_live(run) is False  # no lock file
    lock = FileLock(str(layout.lock), timeout=0)
    with lock:
        assert is_live(run) is True
        watcher = Watcher(run)
        assert watcher.in_flight(ids, True) == []  # every trace ends with a verdict, or is older than the run
        for iid, epoch in (("task-0003", 1), ("odd-e2", 1), ("task-0001", 2)):
            path = run / layout.trace_name(iid, 1, epoch)
            path.write_text(json.dumps({"t": 0.0, "type": "task", "task": "q"}) + "\n")
        got = {(f.instance_id, f.epoch, f.trace) for f in watcher.in_flight(ids, True)}
        keys = (("task-0003", 1), ("odd-e2", 1), ("task-0001", 2))
        assert got == {(i, e, layout.trace_name(i, 1, e)) for i, e in keys}
        with open(run / layout.trace_name("task-0003", 1), "a") as fh:
            fh.write(json.dumps({"type": "verdict", "correct": True}) + "\n")
        assert "task-0003" not in {f.instance_id for f in watcher.in_flight(ids, True)}
    assert is_live(run) is False  # released: the run ended
    assert Watcher(run).in_flight(ids, False) == []


def test_viewer_shows_running_instances_and_accuracy_so_far(tmp_path, page):
    from filelock import FileLock

    run = make_run_dir(tmp_path / "mid", 12)
    in_flight(run, "task-0007", keep=7)
    with FileLock(str(run / ".harness.lock"), timeout=0) as lock, ViewServer([run]) as server:
        wait_ready(page, server.url)
        page.wait_for_selector("#rows tbody tr[data-id='task-0007'] td.st-running")
        assert page.inner_text("#rows tbody tr[data-id='task-0007'] td:nth-child(4)") == "running"
        # ids 0..6: 0, 2 and 6 correct; the 5 not finished are in no denominator
        assert page.inner_text("#progress").startswith("3/7 correct so far, 7 of 12 finished, 1 running")
        chart = page.inner_text("#chart-accuracy")
        assert "(3/7; 7 of 12 finished)" in chart and "level 1" in chart
        assert "(0/4)" not in chart  # the old page counted a level's unfinished instances as failed
        assert page.inner_text(".run-state") == "running"
        assert page.locator("#running a.running-id").count() == 1
        # the running instance's trace streams while its row is open
        page.click("#running a.running-id")
        page.wait_for_selector("#trace .summary-box.running")
        page.wait_for_selector("#trace .ev-system_prompt")
        from harness.results.layout import RunDir

        trace = run / RunDir(run).trace_name("task-0007", 1)
        with open(trace, "a") as fh:  # what the agent's tracer does: one flushed line per event
            fh.write(json.dumps({"t": 2.0, "type": "message", "source": "assistant",
                                 "content": "STREAMED LINE"}) + "\n")
        page.wait_for_function("() => document.querySelector('#trace').innerText.includes('STREAMED LINE')",
                               timeout=60_000)
        # it finishes: its row replaces the running one, and the panel shows the row and the verdict
        row = json.loads((run / "output.jsonl").read_text().splitlines()[-1])
        row.update(instance_id="task-0007", correct=True, status="ok", error_kind=None,
                   trace=RunDir(run).trace_name("task-0007", 1))
        with open(trace, "a") as fh:
            fh.write(json.dumps({"type": "verdict", "source": "run", "status": "ok", "correct": True,
                                 "scores": {}}) + "\n")
        with open(run / "output.jsonl", "a") as fh:
            fh.write(json.dumps(row) + "\n")
        page.wait_for_selector("#rows tbody tr[data-id='task-0007'] td.st-ok", timeout=60_000)
        page.wait_for_selector("#trace .ev-verdict", timeout=60_000)
        assert page.inner_text("#progress").startswith("4/8 correct so far, 8 of 12 finished")
        lock.release()
        (run / "report.json").write_text((run / "report.json").read_text() + " ")  # the run's end rewrites it
        page.wait_for_function("() => document.querySelector('.run-state').innerText.startsWith('not running')",
                               timeout=60_000)
        assert not page.errors
        assert local_only(page.requests, server.url)


def test_viewer_waits_for_a_folder_and_picks_up_new_runs(tmp_path, page):
    runs = tmp_path / "runs"  # does not exist yet
    with ViewServer([runs], compare=False) as server:  # as `harness view` alone: list, do not compare
        wait_ready(page, server.url)
        assert "waiting for" in page.inner_text("#waiting")
        make_run_dir(runs / "first", 12)
        page.wait_for_function("() => document.querySelector('#row-count')"
                               " && document.querySelector('#row-count').dataset.total === '12'", timeout=60_000)
        second = make_run_dir(runs / "second", 12, flip=frozenset({0, 1, 2, 3}))
        page.wait_for_function("() => document.querySelectorAll('#runs-table tbody tr').length === 2", timeout=60_000)
        assert page.locator("#cmp-table").count() == 0  # listed, not compared
        page.select_option("#baseline", str(runs / "first"))
        page.wait_for_selector("#cmp-table")
        assert page.text_content(".fixed-ids").split() == ["task-0001", "task-0003"]
        # a run of another dataset: said, not compared, until asked
        config = json.loads((second / "run.json").read_text())
        (second / "run.json").write_text(json.dumps({**config, "dataset_fingerprint": "another"}))
        (runs / "first" / "run.json").write_text(json.dumps({**config, "dataset_fingerprint": "one"}))
        page.wait_for_function("() => document.querySelector('#cmp-table .delta').innerText"
                               ".includes('not compared: another dataset')", timeout=60_000)
        page.check("#cmp-force")
        page.wait_for_function("() => document.querySelector('#cmp-table .delta').innerText"
                               ".includes('compared anyway')", timeout=60_000)
        assert not page.errors
        assert local_only(page.requests, server.url)


@pytest.mark.docker
def test_view_of_a_real_run_while_it_runs(tmp_path, image, out, page):
    """`harness view DIR` started before DIR exists; a real run (real sandboxes, the plain agent
    against the test server) writes there, its third instance's model call held open: the page
    shows it running with its trace, accuracy so far over the two finished, then the end."""
    import threading

    from tests.fakes.openai_server import FakeOpenAI, hang, text
    from tests.helpers.e2e import REPO, explain, fake_config, harness

    data = tmp_path / "tasks.jsonl"
    data.write_text("".join(json.dumps({"instance_id": f"live-{i}", "question": f"What is {i} times 11?",
                                        "answer": str(11 * i), "level": 1 if i < 3 else 2}) + "\n" for i in (1, 2, 3)))
    server = FakeOpenAI([text("<solution>11</solution>"), text("<solution>22</solution>"), hang(None)]).start()
    view = subprocess.Popen([sys.executable, "-m", "harness", "view", str(out), "--port", "0"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done: list[subprocess.CompletedProcess] = []
    runner = threading.Thread(target=lambda: done.append(harness(
        "run", "--dataset", data, "--model", "fake", "--config", fake_config(tmp_path / "m.toml", server.base_url),
        "--output-dir", out, "--agent", "plain", "--workers", 1, "--instance-timeout", 120)))
    try:
        url = view.stdout.readline().split()[2]
        assert view.stdout.readline().startswith(f"waiting for {out}")
        wait_ready(page, url)
        assert "waiting for" in page.inner_text("#waiting")
        runner.start()
        page.wait_for_selector("#rows tbody tr[data-id='live-3'] td.st-running", timeout=180_000)
        assert page.inner_text("#progress").startswith("2/2 correct so far, 2 of 3 finished, 1 running")
        assert "not judged (0 of 1 finished)" in page.inner_text("#chart-accuracy")  # level 2: none failed
        assert page.inner_text(".run-state") == "running"
        page.click("#rows tbody tr[data-id='live-3']")
        page.wait_for_selector("#trace .summary-box.running")
        page.wait_for_selector("#trace .ev-task")
        assert "What is 3 times 11?" in page.inner_text("#trace")
    finally:
        server.stop()  # the held call ends without an answer: a model error, the run ends
        if runner.is_alive() or done:
            runner.join(timeout=240)
    try:
        assert done and done[0].returncode == 3, explain(done[0]) if done else "the run did not end"
        page.wait_for_selector("#rows tbody tr[data-id='live-3'] td.st-error", timeout=20_000)
        page.wait_for_function("() => document.querySelector('.run-state').innerText === 'finished'", timeout=20_000)
        assert page.inner_text("#progress").startswith("2/3 correct, 3 of 3 finished")
        assert not page.errors
        assert local_only(page.requests, url)
    finally:
        view.terminate()
        view.wait(timeout=10)
