"""Replays that notice a broken environment: tool results against the recording's fingerprints.

The docker tests replay the bundled smoke set (datasets/gaia-smoke, recorded with fingerprints by
scripts/make_smoke_replay.py) in real sandboxes, with and without its offline website; the unit
tests pin the fingerprint rule (harness/models/replay.py) on trace events.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import exit_codes
from harness.config import RunConfiguration
from harness.models.replay import check_replay, fingerprint, recorded_turns
from harness.runner.preflight import unserved_website
from harness.traces import ModelCall, ToolCall, ToolResult
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import REPO, explain, fake_config, harness, out_dir, rows, trace

SMOKE = REPO / "datasets" / "gaia-smoke"
WEB_IDS = ["9cb9fa0f-0690-58a0-b62a-5d6e05c663d0", "220e4558-9eb1-5246-b9e6-02823d126c41",
           "a9360975-2563-5f10-a1be-68dcb8e24b46"]
CODE_ID = "e2509efa-62fd-5994-b70b-e04e13ddc56c"  # list_files, run_python, answer


def smoke_lines() -> dict[str, dict]:
    lines = [json.loads(x) for x in (SMOKE / "replay.jsonl").read_text().splitlines() if x.strip()]
    return {line["instance_id"]: line for line in lines}


def report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def table_text(stdout: str) -> str:
    """The terminal table's text with its borders and wrapping undone."""
    return " ".join(stdout.replace("│", " ").split())


# --- the rule, on trace events (pure logic) ---

def _events(*results: tuple[str, str, bool]) -> list:
    """One model call per tool result, each answered: (tool name, result text, is_error)."""
    events = []
    for number, (name, content, is_error) in enumerate(results):
        events += [ModelCall(tool_calls=[{"name": name, "arguments": {}}]),
                   ToolCall(source="a", name=name, call_id=f"c{number}"),
                   ToolResult(name=name, call_id=f"c{number}", content=content, is_error=is_error)]
    return events + [ModelCall(content="<solution>1</solution>")]


def test_fingerprint_status_and_volatile_parts():
    assert fingerprint("Error: Page.goto: net::ERR_NAME_NOT_RESOLVED")["status"] == "error"
    assert fingerprint("exit code: 1\nstderr:\nTraceback")["status"] == "error"
    killed = "[timed out after 5s; the command and its children were killed]\nexit code: -9"
    assert fingerprint(killed)["status"] == "error"
    assert fingerprint("fine", is_error=True)["status"] == "error"
    assert fingerprint("exit code: 0\nstdout:\n42\n")["status"] == "ok"
    # durations, timestamps, addresses, random names and spacing do not change the hash; the text does
    assert (fingerprint("done in 0.41 s at 2024-05-01T10:00:01Z from 172.18.0.3:8765, /tmp/tmpa1b2/x, id 9f8e7d6c5b4a")
            == fingerprint("done in 12ms at 2025-01-09 23:59:59 from 10.0.0.7:41000,  /tmp/tmpzz/y, id 0123456789ab"))
    assert fingerprint("exit code: 0\nstdout:\n42\n") != fingerprint("exit code: 0\nstdout:\n43\n")


def test_an_error_where_the_recording_had_output_is_a_divergence():
    honest = _events(("visit_url", "Title: Shop", False), ("run_python", "exit code: 0\nstdout:\n7\n", False))
    turns = recorded_turns(honest)
    assert [t.get("results") for t in turns] == [[fingerprint("Title: Shop")],
                                                  [fingerprint("exit code: 0\nstdout:\n7\n")], None]
    check, found = check_replay(turns, honest)
    assert found == [] and check.model_dump() == {"checked": 2, "diverged": 0, "not_checked": 0}

    broken = _events(("visit_url", "Error: net::ERR_NAME_NOT_RESOLVED", False),
                     ("run_python", "exit code: 0\nstdout:\n8\n", False))
    check, found = check_replay(turns, broken)
    assert check.model_dump() == {"checked": 2, "diverged": 2, "not_checked": 0}
    assert [(d.turn, d.name, d.what) for d in found] == [(1, "visit_url", "error where the recording had output"),
                                                          (2, "run_python", "other output")]
    assert found[0].excerpt.startswith("Error: net::ERR_NAME_NOT_RESOLVED")

    bare = [{k: v for k, v in t.items() if k != "results"} for t in turns]  # a recording made before fingerprints
    assert check_replay(bare, broken)[0].model_dump() == {"checked": 0, "diverged": 0, "not_checked": 2}


def test_website_warning_when_the_dataset_ships_one(tmp_path):
    (tmp_path / "website").mkdir()
    data = tmp_path / "tasks.jsonl"
    data.write_text("")
    def configuration(dataset, **sandbox):
        return RunConfiguration.from_flags(dataset=dataset, model="replay", output={"dir": tmp_path / "o"},
                                           sandbox=sandbox)

    warning = unserved_website(configuration(data))
    assert warning is not None and str(tmp_path / "website") in warning and "--website" in warning
    assert "\n" not in warning
    assert unserved_website(configuration(tmp_path, website=tmp_path / "website")) is None
    assert unserved_website(configuration(REPO / "datasets" / "math500-sample")) is None


def test_fail_on_divergence_needs_a_replay_model(tmp_path):
    config = fake_config(tmp_path / "models.toml", "http://127.0.0.1:9/v1")
    proc = harness("run", "--dataset", SMOKE, "--model", "fake", "--config", config, "--output-dir",
                   out_dir(tmp_path), "--website", SMOKE / "website", "--fail-on-divergence")
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    assert "--fail-on-divergence needs a replay model" in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1


# --- real sandboxes ---

def check_the_smoke_run_replays_as_recorded(proc, out: Path, recording: Path) -> None:
    """The smoke set run with its website, `--fail-on-divergence --record` (tests/test_run_e2e.py's main run, so
    that the set is run once): no divergence, and the recording made again has the same turns and fingerprints."""
    assert proc.returncode == 0, explain(proc)
    replay = report(out)["replay"]
    assert replay["rows"] == 21 and replay["checked"] >= 44
    assert replay["divergences"] == 0 and replay["diverged"] == {} and replay["not_checked"] == 0
    assert "replay check divergences: 0 of" in table_text(proc.stdout)
    assert "ships a website" not in proc.stderr
    for row in rows(out):
        assert row["replay"]["diverged"] == 0 and row["replay"]["checked"] >= 1, row["replay"]
        assert not [e for e in trace(out, row) if e["type"] == "divergence"]
    bundled = smoke_lines()
    again = {json.loads(x)["instance_id"]: json.loads(x)["turns"] for x in recording.read_text().splitlines()}
    # same turns, same fingerprints, same transcripts; "needs_image" is the script's (scripts/make_smoke_replay.py)
    assert again == {ident: [{k: v for k, v in turn.items() if k != "needs_image"} for turn in line["turns"]]
                     for ident, line in bundled.items()}


@pytest.mark.docker
def test_smoke_set_without_its_website_diverges_counted_and_printed(out):
    ids = ",".join(WEB_IDS + [CODE_ID])
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--ids", ids, "--output-dir", out,
                   "--workers", 2, "--fail-on-divergence", timeout=600)
    assert proc.returncode == exit_codes.DIVERGED, explain(proc)
    assert "ships a website" in proc.stderr and str(SMOKE / "website") in proc.stderr
    assert "--fail-on-divergence: " in proc.stderr
    replay = report(out)["replay"]
    assert set(replay["diverged"]) == set(WEB_IDS), replay  # the code-only instance still matches
    assert replay["divergences"] == sum(replay["diverged"].values()) >= 10 and replay["not_checked"] == 0
    assert f"replay check divergences: {replay['divergences']} (ids " in table_text(proc.stdout)
    assert all(ident in table_text(proc.stdout) for ident in WEB_IDS)
    by_id = {r["instance_id"]: r for r in rows(out)}
    assert all(r["status"] == "ok" for r in by_id.values())  # today's figures alone would not have told
    first = [e for e in trace(out, by_id[WEB_IDS[0]]) if e["type"] == "divergence"]
    assert len(first) == by_id[WEB_IDS[0]]["replay"]["diverged"] == 3
    assert first[0]["name"] == "visit_url" and first[0]["what"] == "error where the recording had output"
    assert first[0]["recorded"]["status"] == "ok" and first[0]["replayed"]["status"] == "error"
    # no name resolves on the harness-none bridge; a sandbox with no network at all (the socket transport,
    # harness/sandbox/docker/sockets.py) has no network to try
    assert any(why in first[0]["excerpt"] for why in ("ERR_NAME_NOT_RESOLVED", "ERR_INTERNET_DISCONNECTED"))

    # without the flag the exit code is today's (the report, read again, still says it)
    again = harness("run", "--dataset", SMOKE, "--model", "replay", "--ids", ids, "--output-dir", out)
    assert again.returncode == 0, explain(again)
    assert f"divergences: {replay['divergences']} (ids {WEB_IDS[0]}" in table_text(again.stdout)


@pytest.mark.docker
def test_plain_runner_replay_without_the_website_diverges(out):
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--agent", "plain", "--ids", WEB_IDS[0],
                   "--output-dir", out, timeout=600)
    assert proc.returncode == 0, explain(proc)
    assert report(out)["replay"]["diverged"] == {WEB_IDS[0]: 3}


@pytest.mark.docker
def test_a_recording_without_fingerprints_is_not_checked(tmp_path, out):
    bare = tmp_path / "bare.jsonl"
    with open(bare, "w") as fh:
        for ident, line in smoke_lines().items():
            turns = [{k: v for k, v in t.items() if k != "results"} for t in line["turns"]]
            fh.write(json.dumps({"instance_id": ident, "turns": turns}) + "\n")
    config = tmp_path / "models.toml"
    config.write_text(f'[llm.old]\nkind = "replay"\npath = "{bare}"\n')
    run = ["run", "--dataset", SMOKE, "--model", "old", "--config", config, "--ids", f"{WEB_IDS[0]},{CODE_ID}",
           "--website", SMOKE / "website", "--output-dir", out]
    proc = harness(*run, timeout=600)
    assert proc.returncode == 0, explain(proc)
    replay = report(out)["replay"]
    assert replay["checked"] == 0 and replay["divergences"] == 0
    assert replay["not_checked"] == 5 and sorted(replay["not_checked_ids"]) == sorted([WEB_IDS[0], CODE_ID])
    assert "not checked: 5 tool results of 2 instance(s)" in table_text(proc.stdout)

    strict = harness(*run, "--fail-on-divergence")  # nothing left to run: the same report, now a failure
    assert strict.returncode == exit_codes.DIVERGED, explain(strict)
    assert "could not be checked" in strict.stderr


@pytest.mark.docker
def test_a_real_models_recording_replays_without_divergence_until_its_data_changes(tmp_path):
    """Recorded from an OpenAI-compatible server (the real client, real sandbox), the recording replays
    clean; the same recording over a changed file gets other output for the same call: a divergence."""
    code = "import csv\nprint(sum(int(r['n']) for r in csv.DictReader(open('nums.csv'))))\n"
    (tmp_path / "nums.csv").write_text("n\n2\n3\n")
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": "sum", "question": "Sum column n of nums.csv.", "answer": "5",
                                "files": ["nums.csv"], "level": 1}) + "\n")
    recording = tmp_path / "recorded.jsonl"
    script = [tool_calls(("run_python", {"code": code})), text("<solution>5</solution>")]
    with FakeOpenAI(script) as server:
        config = fake_config(tmp_path / "models.toml", server.base_url)
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir",
                       out_dir(tmp_path), "--record", recording)
    assert proc.returncode == 0, explain(proc)
    (line,) = [json.loads(x) for x in recording.read_text().splitlines()]
    assert line["turns"][0]["results"] == [fingerprint("exit code: 0\nstdout:\n5\n")]
    config.write_text(config.read_text() + f'\n[llm.rec]\nkind = "replay"\npath = "{recording}"\n')

    clean = out_dir(tmp_path, "clean")
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", clean,
                   "--fail-on-divergence")
    assert proc.returncode == 0, explain(proc)
    assert report(clean)["replay"] == {"rows": 1, "checked": 1, "divergences": 0, "diverged": {},
                                       "not_checked": 0, "not_checked_ids": []}

    (tmp_path / "nums.csv").write_text("n\n2\n4\n")
    changed = out_dir(tmp_path, "changed")
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", changed,
                   "--fail-on-divergence")
    assert proc.returncode == exit_codes.DIVERGED, explain(proc)
    assert report(changed)["replay"]["diverged"] == {"sum": 1}
    (event,) = [e for e in trace(changed, rows(changed)[0]) if e["type"] == "divergence"]
    assert event["what"] == "other output" and event["name"] == "run_python" and "6" in event["excerpt"]
