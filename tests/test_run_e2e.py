"""`harness run` end to end: replayed models, real containers, real AutoGen agents."""

from __future__ import annotations

import hashlib
import json
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.e2e import SUM, containers_of, harness, one_instance, rows, run_replayed, trace
from tests.test_replay_divergence import check_the_smoke_run_replays_as_recorded

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "datasets" / "gaia-smoke"
# The smoke set's search, image and audio tasks (scripts/make_smoke_web.py, make_smoke_media.py)
SEARCH, CHART, MEMO = ("186b065e-32f9-5511-b2ad-03adaac76864", "4150ac96-fd61-5c6b-8f8e-49b4d07942f0",
                       "3546c9b5-4990-536f-bacb-b497a0871262")


def test_smoke_set_runs_resumes_rescores_and_refuses_changed_config(tmp_path):
    out = tmp_path / f"r{secrets.token_hex(4)}"
    replayed = ("--website", SMOKE / "website", "--fail-on-divergence", "--record", tmp_path / "recorded.jsonl")
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--output-dir", out, "--workers", 2, *replayed,
                   timeout=600)
    check_the_smoke_run_replays_as_recorded(proc, out, tmp_path / "recorded.jsonl")
    got = rows(out)
    metadata = [json.loads(x) for x in (SMOKE / "2023/validation/metadata.jsonl").read_text().splitlines()]
    assert sorted(r["instance_id"] for r in got) == sorted(m["task_id"] for m in metadata)
    assert len(got) == 21 and sum(r["correct"] for r in got) == 19
    browsing = [r for r in got if "visit_url" in r["tool_calls"]]
    assert len(browsing) == 4 and all(r["correct"] for r in browsing)
    for row in browsing:  # the pages really came from the offline site, through the sandbox's browser
        web = [e for e in trace(out, row) if e["type"] == "env" and e["env"] == "web"]
        assert web and all(e["outcome"] == "ok" for e in web), web
        assert "shop.gaia.test" in web[0]["url"]
    downloads = [e for r in browsing for e in trace(out, r) if e.get("action") == "click"
                 and "Downloaded" in e.get("result", "")]
    assert downloads and "/workspace/downloads/supplier-deliveries-2023.csv" in downloads[0]["result"]
    assert {r["answer_source"] for r in got} == {"solution_tag", "final_message"}
    for row in got:  # the answers came from real work in the sandbox, not from the recording alone
        if row["correct"] and row not in browsing and row["instance_id"] not in (CHART, MEMO):
            runs = [e for e in trace(out, row) if e["type"] == "env" and e["action"] == "run_python"]
            assert runs and runs[-1]["stdout"].strip().splitlines()[-1] == row["target"]
        assert row["usage"]["llm_calls"] == row["steps"] >= 2
    assert_search_image_and_audio_ran(out, {r["instance_id"]: r for r in got})
    report = json.loads((out / "report.json").read_text())
    assert report["n_selected"] == 21 and report["n_correct"] == 19 and report["leaked_containers"] == 0
    assert report["per_level"]["3"]["correct"] == 3
    assert (tmp_path / "summary.csv").read_text().count("\n") == 2
    assert containers_of(out) == []

    again = harness("run", "--dataset", SMOKE, "--model", "replay", "--output-dir", out, *replayed)
    assert again.returncode == 0 and "21 instance(s) already finished, 0 to run" in again.stderr
    assert len(rows(out)) == 21

    changed = harness("run", "--dataset", SMOKE, "--model", "replay", "--output-dir", out, "--max-steps", 9,
                      *replayed)
    assert changed.returncode == 2 and "max_steps" in changed.stderr and "--force" in changed.stderr

    rescored = harness("score", out, "--scorer", "exact")
    assert rescored.returncode == 0, rescored.stderr
    assert json.loads((out / "report.json").read_text())["n_correct"] == 19
    assert all("exact" in r["scores"] for r in rows(out))


def assert_search_image_and_audio_ran(out: Path, got: dict[str, dict]) -> None:
    """The replayed smoke set searched its site, showed the chart as an image part and transcribed the memo,
    each through the real tool in the real sandbox (and each answered right)."""
    def env(ident: str, name: str) -> list[dict]:
        return [e for e in trace(out, got[ident]) if e["type"] == "env" and e["env"] == name]

    (search,) = env(SEARCH, "websearch")
    assert search["args"]["provider"] == "site" and search["outcome"] == "ok"
    assert "http://shop.gaia.test/notices/safety-recall-2023" in search["urls"]  # linked from no page: the sitemap
    (picture,) = env(CHART, "image")
    assert picture["action"] == "task_image" and picture["file"] == "/workspace/bar_chart_colours.png", picture
    (heard,) = env(MEMO, "audio")
    wav = (SMOKE / "2023/validation/warehouse_voice_memo.wav").read_bytes()
    assert heard["outcome"] == "ok" and heard["bytes"] == len(wav) and "bay 14" in heard["transcript"]
    assert heard["sha256"] == hashlib.sha256(wav).hexdigest()[:16]  # the sandbox's copy of the file was sent
    assert all(got[i]["correct"] for i in (SEARCH, CHART, MEMO))
    assert got[SEARCH]["env_outcomes"]["websearch"] == {"ok": 1}, got[SEARCH]["env_outcomes"]


def test_sigkill_mid_run_then_rerun_loses_nothing_and_leaks_nothing(tmp_path):
    out = tmp_path / f"r{secrets.token_hex(4)}"
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--dataset", str(SMOKE), "--model", "replay",
                             "--output-dir", str(out), "--workers", "2"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = (out / "output.jsonl").read_text().count("\n") if (out / "output.jsonl").exists() else 0
        if done >= 3:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = rows(out)
    assert 3 <= len(partial) < 21
    with open(out / "output.jsonl", "a") as fh:  # a crash mid-write leaves a torn line
        fh.write('{"instance_id": "torn')
    rerun = harness("run", "--dataset", SMOKE, "--model", "replay", "--output-dir", out, "--workers", 2)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    final = rows(out)
    ids = [r["instance_id"] for r in final]
    assert len(ids) == 21 == len(set(ids)), "every instance exactly once"
    assert containers_of(out) == []


@pytest.mark.parametrize("content, message", [
    ('{"instance_id": "a", "question": "q", "answer": "1"}\n{"instance_id": "a", "question": "q", "answer": "2"}\n',
     "duplicate id 'a'"),
    ('{"instance_id": "a", "question": "q", "answer": "1", "files": ["missing.pdf"]}\n', "missing.pdf"),
    ('{"instance_id": "a", "question": "q", "answer": "1"}\n{not json\n', "line 2"),
    ('{"ident": "a", "question": "q", "answer": "1"}\n', "instance_id"),  # ("id" is an alias)
    ('{"instance_id": "a", "question": "q", "answer": "1", "files": ["../etc/passwd"]}\n', ".."),
])
def test_malformed_datasets_exit_2_before_any_container(tmp_path, content, message):
    data = tmp_path / "bad.jsonl"
    data.write_text(content)
    out = tmp_path / f"r{secrets.token_hex(4)}"
    proc = harness("run", "--dataset", data, "--model", "replay", "--output-dir", out)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    # Refused during validation: the output dir (made after preflight) and containers never existed.
    assert not out.exists() and containers_of(out) == []


@pytest.mark.parametrize("flags, message", [
    (["--stride", "0"], "--stride"), (["--model", "nope"], "--model nope"), (["--agent", "nope"], "--agent nope"),
    (["--network", "bogus"], "network"), (["--ids", "not-there"], "not-there"),
    (["--memory", "abc"], "memory"), (["--cpus", "0"], "cpus"), (["--max-steps", "0"], "--max-steps"),
    (["--scorer", "gaia@0.5"], "graded"),  # (tool_calls without names reads each task's expectations)
    (["--scorer", "tool_calls:a", "--scorer", "tool_calls:b"], "more than once"),
    (["--sandbox", "nosuch.module:Provider"], "--sandbox nosuch.module:Provider"),
])
def test_bad_flags_exit_2(tmp_path, flags, message):
    data, config = one_instance(tmp_path, SUM)
    args = ["run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", tmp_path / "o"]
    args += flags
    if "--model" in flags:
        args = args[:3] + args[5:]
    proc = harness(*args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


def test_wall_time_limit_kills_the_agent_and_still_scores(tmp_path):
    sleep = {"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 600"}}]}
    data, config = one_instance(tmp_path, [sleep, {"content": "<solution>6</solution>"}])
    out = tmp_path / f"r{secrets.token_hex(4)}"
    started = time.monotonic()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--instance-timeout", 4, "--command-timeout", 900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.monotonic() - started < 60
    (row,) = rows(out)
    assert row["status"] == "limit" and row["limit"] == "wall_time" and row["correct"] is False
    assert row["usage"]["llm_calls"] == 1 and row["tool_calls"] == ["run_shell"]  # salvaged from the trace
    assert containers_of(out) == []


def test_max_steps_limit_is_recorded_and_scored(tmp_path):
    call = {"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo step"}}]}
    data, config = one_instance(tmp_path, [call] * 5 + [{"content": "<solution>6</solution>"}])
    out = tmp_path / f"r{secrets.token_hex(4)}"
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--max-steps", 2)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = rows(out)
    assert row["status"] == "limit" and row["limit"] == "max_steps" and row["usage"]["llm_calls"] == 2
    assert row["tool_calls"] == ["run_shell", "run_shell"]  # kept from the trace

    wider = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                    "--max-steps", 2, "--limit", 5)  # a wider selection is the same run: it resumes
    assert wider.returncode == 0 and "already finished" in wider.stderr


def test_answer_tags_any_case_multiline_and_team_agent(tmp_path):
    turns = SUM + [{"content": "Checked: <solution>6</solution>"}]
    proc, out = run_replayed(tmp_path, turns, "--agent", "roundrobin")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is True and row["answer"] == "6"
    events = trace(out, row)
    sources = {e["source"] for e in events if e["type"] == "message"}
    assert {"solver", "reviewer"} <= sources
    (offered,) = [e for e in events if e["type"] == "tools"]  # the solver's tools; the reviewer holds none
    assert list(offered["agents"]) == ["solver"] and "run_python" in offered["agents"]["solver"]
    assert {e["name"] for e in events if e["type"] == "tool_call"} <= {d["function"]["name"] for d in offered["tools"]}


def test_dead_sandbox_is_an_infra_error_retried_on_a_fresh_sandbox(tmp_path):
    data, config = one_instance(tmp_path, SUM)
    out = tmp_path / f"r{secrets.token_hex(4)}"
    env = {"HARNESS_TEST_MARKER": str(tmp_path / "marker"), "HARNESS_RETRY_BACKOFF": "0.1"}
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--agent", "tests.helpers.agents:kills_its_first_sandbox", "--max-retries", 1, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = rows(out)
    assert row["attempt"] == 2 and row["status"] == "ok" and row["correct"] is True
    assert row["usage"]["llm_calls"] == 3  # the lost attempt's model call still counts
    assert (tmp_path / "marker").exists()

    (tmp_path / "marker").unlink()
    out2 = tmp_path / f"r{secrets.token_hex(4)}"
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out2,
                   "--agent", "tests.helpers.agents:kills_its_first_sandbox", "--max-retries", 0, env=env)
    assert proc.returncode == 3  # every instance errored (harness/exit_codes.py)
    (row,) = rows(out2)
    assert row["status"] == "error" and row["error_kind"] == "infra" and row["correct"] is False
    assert json.loads((out2 / "report.json").read_text())["errors_by_kind"] == {"infra": 1}


def test_multimodal_web_surfer_drives_the_sandbox_browser(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"instance_id": "surf", "question": "When was Northwind Garden Supply founded?",
                                "answer": "1987"}) + "\n")
    turns = [{"tool_calls": [{"name": "visit_url", "arguments": {"reasoning": "open it",
                                                                  "url": "http://shop.gaia.test/about"}}]},
             {"content": "The about page says 1987. <solution>1987</solution>"}]
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"instance_id": "surf", "turns": turns}) + "\n")
    config = tmp_path / "config.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    out = tmp_path / f"r{secrets.token_hex(4)}"
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--agent", "websurfer", "--website", SMOKE / "website")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is True, row
    surfer = [e["content"] for e in trace(out, row) if e["type"] == "message" and e["source"] == "web_surfer"]
    assert any("About us" in m for m in surfer), surfer  # it saw the site's page, in the sandbox
    (offered,) = [e for e in trace(out, row) if e["type"] == "tools"]
    assert "visit_url" in offered["agents"]["web_surfer"]  # MultimodalWebSurfer's own tools, traced too
    assert containers_of(out) == []
