"""Run control under faults (issue 9): a failed row write, a hanging model, SIGTERM/SIGHUP and
kill -9, errors as plain text, preflight and exit codes.

Each test drives the real CLI (`python -m harness run` in a subprocess) on real sandboxes with
a replay model or the scripted fake OpenAI server, provokes one fault and checks the run's
promises: every selected instance ends with exactly one row after a resume (nothing lost),
no container of the run is left (nothing leaked), and the exit code says what happened
(harness/exit_codes.py).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness import exit_codes
from tests.fakes.openai_server import FakeOpenAI, error, hang, raw, text
from tests.helpers.e2e import (
    FAKE_KEY_ENV,
    SOLVE,
    containers_created_between,
    containers_of,
    dataset_42,
    explain,
    fake_config,
    harness,
    lost_results,
    no_traceback,
    out_dir,
    remove_leftovers,
    rows,
    sleeping,
    start,
)
from tests.helpers.wait import wait_for


# ------------------------------------------------------------------ helpers
@contextmanager
def _immutable(path: Path):
    """`chattr +i`: unwritable even for root (tests run as root); undone on the way out."""
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"chattr +i not supported here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------ item 4: a failed row write
@pytest.mark.docker
def test_unwritable_output_mid_run_rescues_the_rows_and_a_resume_merges_them(tmp_path, image, reliability):
    ids = [f"w{i}" for i in range(4)]
    data, config = dataset_42(tmp_path / "data", ids, lambda iid: sleeping(1))
    out = out_dir(tmp_path)
    args = ("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out, "--workers", 1)
    t0 = time.monotonic()
    proc = start(*args)
    try:
        wait_for(lambda: (out / "output.jsonl").is_file() and (out / "output.jsonl").read_text().count("\n") >= 1,
                  60, "the first row")
        with _immutable(out / "output.jsonl"):
            stdout, stderr = proc.communicate(timeout=120)
            first = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
            started = {p.name.split("-")[0] for p in (out / "traces").glob("*.jsonl")}
        no_traceback(first)
        assert first.returncode == exit_codes.ROWS_NOT_WRITTEN, explain(first)
        assert f"cannot write results to {out / 'output.jsonl'}" in first.stderr, explain(first)
        assert "Operation not permitted" in first.stderr, explain(first)
        assert "not started" in first.stderr and str(out / "output.rescue.jsonl") in first.stderr, explain(first)
        assert len(started) < len(ids), f"every instance still ran: {started}"
        rescued = [json.loads(line) for line in (out / "output.rescue.jsonl").read_text().splitlines()]
        assert rescued and len(rows(out)) + len(rescued) == len(started), (rescued, started)

        resumed = harness(*args)
        lost, leaked = lost_results(out, ids), len(containers_of(out))
        reliability.record("output.jsonl unwritable mid-run (chattr +i), then resume",
                           f"exit {first.returncode}, {len(rescued)} row(s) rescued, "
                           f"{len(ids) - len(started)} not started; resume merged them",
                           lost=lost, leaked=leaked, started=t0)
        assert resumed.returncode == 0, explain(resumed)
        assert f"merged {len(rescued)} row(s)" in resumed.stderr, explain(resumed)
        assert not (out / "output.rescue.jsonl").exists()
        assert lost == 0 and leaked == 0
        assert all(r["status"] == "ok" and r["correct"] for r in rows(out))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        remove_leftovers(out)


def test_rescue_falls_back_to_the_temp_dir_when_the_run_dir_refuses_too(tmp_path):
    from harness.results.model import ResultRow
    from harness.results.store import merge_rescue, rescue

    out = tmp_path / "run" / "output.jsonl"
    out.parent.mkdir()
    row = ResultRow(instance_id="a", status="ok", finished_at="2030-01-01T00:00:00+00:00")
    with _immutable(out.parent):
        place = rescue(out, [row])
    try:
        assert place is not None and place.parent != out.parent, place
        assert ResultRow.model_validate_json(place.read_text()) == row
    finally:
        if place is not None:
            place.unlink(missing_ok=True)
    # Merging: a row already there is not added twice, an older one does not win over a newer one.
    older = ResultRow(instance_id="b", status="error", error_kind="model", finished_at="2030-01-01T00:00:00+00:00")
    newer = ResultRow(instance_id="b", status="ok", finished_at="2030-01-02T00:00:00+00:00")
    out.write_text(row.model_dump_json() + "\n" + newer.model_dump_json() + "\n")
    (out.parent / "output.rescue.jsonl").write_text(row.model_dump_json() + "\n" + older.model_dump_json() + "\n")
    assert merge_rescue(out) == 0 and not (out.parent / "output.rescue.jsonl").exists()
    assert out.read_text().count("\n") == 2


# ------------------------------------------------------------------ item 5: a hanging model
@pytest.mark.docker
def test_a_hanging_model_is_a_model_error_in_the_report_and_retried_on_resume(tmp_path, image, reliability):
    iid = f"hang-{out_dir(tmp_path).name}"
    data, _ = dataset_42(tmp_path / "data", [iid])
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    # The agent's first call hangs; whatever comes later is answered. The section's own timeout (30 s)
    # is longer than the instance's wall-clock limit (6 s): the harness must cap it.
    with FakeOpenAI([hang()], default=text("<solution>42</solution>")) as server:
        config = fake_config(tmp_path / "models.toml", server.base_url)
        args = ("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                "--instance-timeout", 6)
        first = harness(*args, timeout=120)
        (row,) = rows(out)
        report = json.loads((out / "report.json").read_text())
        resumed = harness(*args, timeout=120)
    reliability.record("model hangs (no answer at all)", f"row error_kind {row['error_kind']}, exit "
                       f"{first.returncode}; resume retried it: exit {resumed.returncode}",
                       lost=lost_results(out, [iid]), leaked=len(containers_of(out)), started=t0)
    assert row["status"] == "error" and row["error_kind"] == "model", row
    assert row["limit"] is None and ("timed out" in row["error"].lower() or "no reply" in row["error"]), row
    # Ended by the capped client ("no reply" above), not by the kill at 6 s; the row's duration also
    # holds the sandbox's start and removal, so it is only bounded loosely here (a loaded machine).
    assert row["duration_s"] < 30, row
    assert report["errors_by_kind"] == {"model": 1} and report["n_limit"] == {}, report
    assert first.returncode == exit_codes.INSTANCE_ERRORS, explain(first)
    assert resumed.returncode == 0, explain(resumed)
    errored, retried = rows(out)  # the resume ran the errored instance again
    assert retried["status"] == "ok" and retried["correct"] is True, retried
    assert containers_of(out) == []


@pytest.mark.docker
def test_an_agent_killed_while_waiting_on_its_model_is_a_model_error(tmp_path, image, reliability):
    data, config = dataset_42(tmp_path / "data", ["stuck"])
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--agent", "tests.helpers.stuck_model:StuckModelRunner", "--instance-timeout", 4)
    (row,) = rows(out)
    reliability.record("model call that ignores every timeout (killed at the wall-clock limit)",
                       f"row error_kind {row['error_kind']}, exit {proc.returncode}",
                       lost=lost_results(out, ["stuck"]), leaked=len(containers_of(out)), started=t0)
    assert row["status"] == "error" and row["error_kind"] == "model" and row["limit"] is None, row
    assert "stuck-model" in row["error"] and "wall-clock" in row["error"], row
    assert proc.returncode == exit_codes.INSTANCE_ERRORS, explain(proc)
    events = [json.loads(line) for line in (out / row["trace"]).read_text().splitlines()]
    (kill,) = [e for e in events if e["type"] == "limit"]  # the parent's record of the kill
    assert kill["detail"].startswith("killed at --instance-timeout 4 s while waiting on the model"), kill
    assert events[-1]["type"] == "verdict" and events[-1]["status"] == "error"
    assert containers_of(out) == []


def test_a_slow_answer_cut_by_the_wall_clock_is_still_a_limit(tmp_path):
    """The rule: a call waiting less than one request's timeout when killed is a limit, not the model's fault."""
    from harness.traces import ModelCall, ModelCallStarted, Tracer
    from harness.traces.forensics import read_facts

    path = tmp_path / "t.jsonl"
    tracer = Tracer(path)
    tracer.emit(ModelCallStarted(model="m", timeout=60, at=1000.0))
    tracer.emit(ModelCall(model="m"))
    tracer.emit(ModelCallStarted(model="m", timeout=60, at=2000.0))
    tracer.close()
    assert read_facts(path).waiting_on_model(now=2010.0) is None  # 10 s into a 60 s request
    assert "no reply after 70 s" in read_facts(path).waiting_on_model(now=2070.0)
    with open(path, "a") as fh:
        fh.write(json.dumps({"type": "error", "kind": "model", "message": "failed"}) + "\n")
    assert read_facts(path).waiting_on_model(now=2070.0) is None  # the call failed: nothing was in flight


# ------------------------------------------------------------------ item 6: SIGTERM, SIGHUP, kill -9
@pytest.mark.docker
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_end_the_run_like_ctrl_c(tmp_path, image, reliability, signum):
    ids = ["quick", "long1", "long2"]
    data, config = dataset_42(tmp_path / "data", ids, lambda iid: SOLVE if iid == "quick" else sleeping(120))
    out = out_dir(tmp_path)
    proc = start("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                  "--workers", 2)
    try:
        wait_for(lambda: (out / "output.jsonl").is_file() and len(containers_of(out)) >= 2, 90,
                  "a finished row and two running sandboxes")
        t0 = time.monotonic()
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=60)
        ended = time.monotonic() - t0
        wait_for(lambda: not containers_of(out) or time.monotonic() - t0 > 15, 20, "sandbox removal")
        leaked = len(containers_of(out))
        got = rows(out)
        reliability.record(f"{signal.Signals(signum).name} mid-run",
                           f"exit {proc.returncode} after {ended:.1f} s, sandboxes removed, finished row kept",
                           leaked=leaked, started=t0)
        result = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        assert proc.returncode == exit_codes.signalled(signum), explain(result)
        no_traceback(result)
        assert leaked == 0
        assert [r["instance_id"] for r in got] == ["quick"] and got[0]["correct"] is True
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        remove_leftovers(out)


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _token_files(out: Path) -> list[Path]:
    """Agent request files (they hold sandbox tokens) of runs into `out`, wherever they are."""
    found = []
    for path in [*Path("/tmp").glob("harness-child-*/request.json"), *out.glob(".harness-tmp/**/request.json")]:
        try:
            if str(out) in path.read_text():
                found.append(path)
        except OSError:
            continue
    return found


@pytest.mark.docker
def test_kill9_leaves_no_sandbox_token_outside_the_run_dir_and_the_next_run_removes_them(tmp_path, image,
                                                                                         reliability):
    ids = ["quick", "long1", "long2"]
    data, config = dataset_42(tmp_path / "data", ids, lambda iid: SOLVE if iid == "quick" else sleeping(120))
    out = out_dir(tmp_path)
    proc = start("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                  "--workers", 3)
    try:
        # Killed once "quick" has its row: the next run, selecting only it, has nothing to run, and must still
        # reap what the killed one left (it once did only when "quick" was still running at the kill).
        wait_for(lambda: len(_token_files(out)) >= 2 and '"quick"' in _text(out / "output.jsonl"), 90,
                 "two running agents and quick's row")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        left = _token_files(out)
        tokens = {json.loads(p.read_text())["sandbox"]["token"] for p in left}
        assert left and all(p.is_relative_to(out / ".harness-tmp") for p in left), left
        assert stat.S_IMODE((out / ".harness-tmp").stat().st_mode) == 0o700
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in left)

        again = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                        "--ids", "quick")  # the next run into the dir, whatever it selects
        remaining = _token_files(out)
        holders = [p for p in out.rglob("*") if p.is_file() and any(t in p.read_text(errors="replace")
                                                                     for t in tokens)]
        reliability.record("kill -9 of the harness: sandbox tokens on disk",
                           f"request files only under DIR/.harness-tmp (0700); {len(remaining)} left after "
                           "the next run", leaked=len(containers_of(out)), started=t0)
        assert again.returncode == 0, explain(again)
        assert remaining == [] and holders == [], (remaining, holders)
        assert containers_of(out) == []  # the next run reaped the killed run's sandboxes too
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        remove_leftovers(out)


# ------------------------------------------------------------------ item 9: errors as plain text
def test_errors_are_printed_as_plain_text_on_one_line(tmp_path):
    data, config = dataset_42(tmp_path / "data", ["p0"])
    nope = harness("run", "--dataset", data, "--model", "nope", "--config", config, "--output-dir", tmp_path / "o")
    assert nope.returncode == 2 and "no [llm.nope] section in the config" in nope.stderr, explain(nope)

    odd = tmp_path / "odd[/x]dir" / ("very-long-name-" * 6) / "tasks.jsonl"
    missing = harness("run", "--dataset", odd, "--model", "replay", "--output-dir", tmp_path / "o")
    no_traceback(missing)
    assert missing.returncode == 2, explain(missing)
    (line,) = [x for x in missing.stderr.splitlines() if "error (input)" in x]
    assert str(odd) in line and len(line) > 120, missing.stderr  # the whole message, [/x] and all, one line


# ------------------------------------------------------------------ item 10: exit codes and preflight
@pytest.mark.docker
def test_errored_instances_exit_3_and_fail_on_error_stops_starting_more(tmp_path, image, reliability):
    ids = [f"e{i}" for i in range(4)]
    data, config = dataset_42(tmp_path / "data", ids, lambda iid: [])  # nothing recorded: a model error each
    one = out_dir(tmp_path)
    alone = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", one,
                    "--ids", "e0")
    assert alone.returncode == exit_codes.INSTANCE_ERRORS, explain(alone)
    assert rows(one)[0]["error_kind"] == "model"

    out = out_dir(tmp_path)
    t0 = time.monotonic()
    stopped = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                      "--workers", 1, "--fail-on-error", 2)
    reliability.record("every instance errors, --fail-on-error 2", f"exit {stopped.returncode} after "
                       f"{len(rows(out))} of {len(ids)} instances", leaked=len(containers_of(out)), started=t0)
    assert stopped.returncode == exit_codes.INSTANCE_ERRORS, explain(stopped)
    assert len(rows(out)) == 2 and "--fail-on-error 2" in stopped.stderr and "not started" in stopped.stderr
    assert json.loads((out / "report.json").read_text())["n_missing"] == 2
    bad = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                  "--fail-on-error", "0")
    assert bad.returncode == 2 and "--fail-on-error" in bad.stderr, explain(bad)


def _judge_config(path: Path, agent_url: str, judge_url: str) -> Path:
    fake_config(path, agent_url)
    path.write_text(path.read_text() + f'\n[llm.judge]\nmodel = "judge-1"\nbase_url = "{judge_url}"\n'
                                       f'api_key_env = "{FAKE_KEY_ENV}"\nmax_retries = 0\n')
    return path


NOT_FOUND = error(404, {"error": {"message": "The model `fake-model-1` does not exist.", "type": "NotFoundError",
                                  "param": None, "code": 404}})
BAD_KEY = error(401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                "param": None, "code": "invalid_api_key"}})


@pytest.mark.docker
@pytest.mark.parametrize("case, expect", [
    ("unreachable", "Connection refused"),
    ("model 404", "The model `fake-model-1` does not exist."),
    ("key 401", "Incorrect API key provided."),
    ("not json", "not a chat completion"),
    ("judge 404", "--judge-model judge"),
])
def test_model_preflight_exits_2_before_any_container(tmp_path, reliability, case, expect):
    iid = f"pre-{out_dir(tmp_path).name}"
    data, _ = dataset_42(tmp_path / "data", [iid])
    out = out_dir(tmp_path)
    probe = {"model 404": NOT_FOUND, "key 401": BAD_KEY, "not json": raw("<html>hello</html>", 200, "text/html")}
    with FakeOpenAI([], default=text("<solution>42</solution>"), probe=probe.get(case)) as agent, \
            FakeOpenAI([], probe=NOT_FOUND if case == "judge 404" else None) as judge:
        url = f"http://127.0.0.1:{_free_port()}/v1" if case == "unreachable" else agent.base_url
        config = _judge_config(tmp_path / "models.toml", url, judge.base_url)
        since = time.time()
        t0 = time.monotonic()
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--scorer", "gaia", "--scorer", "llm_judge", "--judge-model", "judge", timeout=120)
        created = containers_created_between(iid, since, time.time())
        reliability.record(f"model preflight: {case}", f"exit {proc.returncode} before any container",
                           leaked=len(created), started=t0)
        assert agent.chat_requests == [] and judge.chat_requests == []
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    no_traceback(proc)
    assert expect in proc.stderr, explain(proc)
    assert created == [] and not (out / "output.jsonl").exists()


@pytest.mark.docker
@pytest.mark.parametrize("flags, expect", [
    (["--cpus", "64"], "--cpus 64.0: the engine has"),
    (["--memory", "8m"], "--memory 8m: a sandbox needs at least 64m"),
    (["--memory", "100000g"], "--memory 100000g: the engine has"),
])
def test_sandbox_resources_beyond_the_engine_exit_2_before_any_container(tmp_path, image, flags, expect):
    iid = f"res-{out_dir(tmp_path).name}"
    data, config = dataset_42(tmp_path / "data", [iid])
    since = time.time()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir",
                   out_dir(tmp_path), *flags)
    assert proc.returncode == exit_codes.INPUT and expect in proc.stderr, explain(proc)
    assert containers_created_between(iid, since, time.time()) == []


@pytest.mark.docker
def test_an_unwritable_output_dir_exits_2_before_any_container(tmp_path, image):
    iid = f"ro-{out_dir(tmp_path).name}"
    data, config = dataset_42(tmp_path / "data", [iid])
    args = ("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir")
    since = time.time()
    readonly = out_dir(tmp_path)
    readonly.mkdir()
    with _immutable(readonly):
        refused = harness(*args, readonly)
    under_a_file = harness(*args, data / "out")
    old = out_dir(tmp_path)
    old.mkdir()
    (old / "output.jsonl").write_text("")
    with _immutable(old / "output.jsonl"):
        frozen = harness(*args, old)
    for proc in (refused, under_a_file, frozen):
        no_traceback(proc)
        assert proc.returncode == exit_codes.INPUT and "is not writable" in proc.stderr, explain(proc)
    assert containers_created_between(iid, since, time.time()) == []


GARBAGE = [raw("<html>busy</html>", 200, "text/html"), raw("{not json", 200, "application/json"),
           raw(json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model-1",
                           "choices": []}))]


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["assistant", "plain"])
def test_garbage_model_replies_are_model_errors(tmp_path, image, reliability, agent):
    ids = ["g-html", "g-badjson", "g-nochoices"]
    data, _ = dataset_42(tmp_path / "data", ids)
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    with FakeOpenAI(GARBAGE) as server:
        config = fake_config(tmp_path / "models.toml", server.base_url)
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", agent, "--workers", 1, timeout=180)
    got = {r["instance_id"]: r for r in rows(out)}
    reliability.record(f"model replies garbage ({agent} agent)", "rows: " + ", ".join(
        f"{i} {got[i]['error_kind']}" for i in ids), lost=lost_results(out, ids), leaked=len(containers_of(out)),
                       started=t0)
    assert {i: got[i]["error_kind"] for i in ids} == {i: "model" for i in ids}, got
    assert proc.returncode == exit_codes.INSTANCE_ERRORS, explain(proc)
    assert json.loads((out / "report.json").read_text())["errors_by_kind"] == {"model": 3}
    assert containers_of(out) == []


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mserver says no\x1b[0m\x08\x00"


@pytest.mark.docker
@pytest.mark.parametrize("case, status", [("busy 503 (a warning)", 503), ("key 401 (exit 2)", 401)])
def test_a_model_servers_escape_sequences_never_reach_the_terminal(tmp_path, reliability, case, status):
    """Issue 18 item 11: a model server's error text reached the terminal with its escape sequences
    (a title change, a cleared screen). The words arrive; the sequences and control characters do not."""
    iid = f"esc-{out_dir(tmp_path).name}"
    data, _ = dataset_42(tmp_path / "data", [iid])
    out = out_dir(tmp_path)
    probe = error(status, {"error": {"message": HOSTILE, "type": "x", "param": None, "code": status}})
    with FakeOpenAI([], default=text("<solution>42</solution>"), probe=probe) as agent:
        config = fake_config(tmp_path / "models.toml", agent.base_url)
        t0 = time.monotonic()
        # --cpus beyond any engine: the busy case stops with exit 2 after its warning, before any container.
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--cpus", "100000", timeout=120)
    leaked = len(containers_of(out))
    escapes = sum(proc.stderr.count(c) + proc.stdout.count(c) for c in "\x1b\x07\x08\x00")
    reliability.record(f"model server error text with escape sequences: {case}",
                       f"exit {proc.returncode}; {escapes} control characters reached the terminal",
                       leaked=leaked, started=t0)
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    assert "server says no" in proc.stderr, explain(proc)
    assert escapes == 0, repr(proc.stderr)
    assert leaked == 0
