"""Issue 29 item 1: a --web-record run's archive survives every stop its rows survive.

Before, Ctrl-C or SIGTERM mid-run removed the run's containers (the web proxy among them) before the
proxy's archive was copied out: a 404 on the copy, exit 1 instead of 130/143, and no WARC in web/. After a
kill -9, the next run into the directory reaped the proxy that still held the archive, so the finished
instances replayed with misses. Real CLI, real sandboxes and Chromium, the smoke site, a replay model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness import exit_codes
from harness.web.recorded import web_archives
from tests.helpers.e2e import (
    containers_of,
    explain,
    harness,
    no_traceback,
    out_dir,
    remove_leftovers,
    replay_dataset,
    rows,
    start,
    web_responses,
)
from tests.helpers.locks import machine_lock
from tests.helpers.wait import wait_for

SMOKE = Path(__file__).resolve().parents[2] / "datasets" / "gaia-smoke"
SITE = "http://shop.gaia.test"
PAGES = [f"{SITE}/about", f"{SITE}/catalog?page=2"]
# Deadlines for a loaded 2-core machine: a website, a proxy, a sandbox and its Chromium start first.
BROWSED_S = 240


def visits(*urls: str) -> list[dict]:
    return [{"tool_calls": [{"name": "visit_url", "arguments": {"url": url}}]} for url in urls]


STALL = [{"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 600"}}]},
         {"content": "<solution>42</solution>"}]
ANSWER = [{"content": "<solution>42</solution>"}]


def browsed(out: Path, instance: str, count: int) -> bool:
    """The instance's trace shows `count` pages visited (the browser's env events, outcome ok)."""
    done = 0
    for path in (out / "traces").glob(f"{instance}*.jsonl"):
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line being written
            done += event.get("type") == "env" and event.get("env") == "web" and event.get("action") == "visit" \
                and event.get("outcome") == "ok"
    return done >= count


def run_args(data: Path, config: Path, out: Path, *extra) -> tuple:
    return ("run", "--dataset", data, "--model", "rec", "--config", config, "--website", SMOKE / "website",
            "--web-record", "--output-dir", out, "--workers", 1, *extra)


def _end(proc: subprocess.Popen, out: Path) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    remove_leftovers(out)


@pytest.mark.docker
# Ctrl-C is slow: SIGTERM keeps the rule in the default run (the harness handles both alike: test_run_control's
# test_sigterm_and_sighup_end_the_run_like_ctrl_c).
@pytest.mark.parametrize("signum", [pytest.param(signal.SIGINT, marks=pytest.mark.slow), signal.SIGTERM],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_run_keeps_the_pages_recorded_so_far(tmp_path, proxy_image, reliability, signum):
    data, config = replay_dataset(tmp_path / "data", [("browsed", "What is 6*7?", "42")],
                                  lambda iid: visits(*PAGES) + STALL)
    out = out_dir(tmp_path)
    proc = start(*run_args(data, config, out))
    try:
        wait_for(lambda: browsed(out, "browsed", len(PAGES)), BROWSED_S, "both pages visited")
        t0 = time.monotonic()
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole foreground group
        else:
            proc.send_signal(signal.SIGTERM)  # kill, timeout, a scheduler: the harness alone
        stdout, stderr = proc.communicate(timeout=120)
        ended = time.monotonic() - t0
        result = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        got = web_responses(out)
        leaked = len(containers_of(out))
        kept = [page for page in PAGES if got.get(page) == "browsed/1"]
        reliability.record(f"{signal.Signals(signum).name} mid --web-record run",
                           f"exit {proc.returncode} after {ended:.1f} s, {len(web_archives(out))} WARC in web/, "
                           f"{len(kept)} of {len(PAGES)} visited pages in it", leaked=leaked, started=t0)
        assert proc.returncode == exit_codes.signalled(signum), explain(result)
        no_traceback(result)
        assert kept == PAGES, (got, explain(result))
        assert leaked == 0
    finally:
        _end(proc, out)


@pytest.mark.docker
def test_kill9_then_resume_keeps_the_archive_and_the_finished_instance_replays_without_misses(
        tmp_path, proxy_image, reliability):
    turns = {"first": visits(PAGES[0]) + ANSWER, "second": visits(PAGES[1]) + STALL}
    data, config = replay_dataset(tmp_path / "data", [(i, "What is 6*7?", "42") for i in turns], turns.__getitem__)
    out = out_dir(tmp_path)
    proc = start(*run_args(data, config, out))
    try:
        wait_for(lambda: (out / "output.jsonl").is_file() and rows(out) and browsed(out, "second", 1), BROWSED_S,
                 "the first row and the second instance's page")
        with machine_lock("reap"):  # the resume reaps the host's orphans: none of another test's first
            t0 = time.monotonic()
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            assert [r["instance_id"] for r in rows(out)] == ["first"]
            again = harness(*run_args(data, config, out, "--ids", "first"))  # the next run into the dir reaps
        got = web_responses(out)
        replayed = out_dir(tmp_path, "p")
        replay = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--ids", "first",
                         "--web-replay", out, "--output-dir", replayed)
        outcomes = rows(replayed)[0]["env_outcomes"].get("web_archive", {}) if replay.returncode == 0 else {}
        leaked = len(containers_of(out)) + len(containers_of(replayed))
        reliability.record("kill -9 mid --web-record run, then resume and replay",
                           f"{len(web_archives(out))} WARC in web/ after the resume; the finished instance "
                           f"replayed with {outcomes.get('hit', 0)} hit(s), {outcomes.get('miss', 0)} miss(es)",
                           leaked=leaked, started=t0)
        assert again.returncode == 0, explain(again)
        assert got.get(PAGES[0]) == "first/1" and got.get(PAGES[1]) == "second/1", got
        assert replay.returncode == 0, explain(replay)
        assert outcomes.get("miss", 0) == 0 and outcomes.get("hit", 0) >= 1, outcomes
        assert leaked == 0
    finally:
        _end(proc, out)
