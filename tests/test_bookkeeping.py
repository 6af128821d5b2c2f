"""Bookkeeping that scales: attachment checks once per unique file, a resume that reads only what it
needs of output.jsonl, and a report reused when nothing it rests on changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness.datasets import attachments, load
from harness.datasets import rows as table_rows
from tests.helpers.e2e import explain, harness, rows


def test_a_shared_attachment_is_checked_once(tmp_path, monkeypatch):
    (tmp_path / "corpus.txt").write_text("shared")
    (tmp_path / "data.jsonl").write_text("".join(json.dumps({"instance_id": f"i{n}", "question": "q", "answer": "a",
                                                              "files": ["corpus.txt"]}) + "\n" for n in range(500)))
    calls = {"attachment": 0, "size": 0}
    real_attachment, real_size = attachments.attachment_problems, attachments.size_problem

    def attachment(*args):
        calls["attachment"] += 1
        return real_attachment(*args)

    def size(*args):
        calls["size"] += 1
        return real_size(*args)

    monkeypatch.setattr(attachments, "attachment_problems", attachment)
    monkeypatch.setattr(attachments, "size_problem", size)
    assert len(load.load_dataset(tmp_path / "data.jsonl").instances) == 500
    assert calls == {"attachment": 1, "size": 1}


def test_jsonl_datasets_load_without_pandas(tmp_path):
    (tmp_path / "data.jsonl").write_text(json.dumps({"instance_id": "a", "question": "q", "answer": "1"}) + "\n")
    code = ("import sys; from harness.datasets import load_dataset; "
            f"load_dataset({str(tmp_path / 'data.jsonl')!r}); print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _two_replayed(tmp_path):
    """`harness run` arguments of instances a and b, each answered "1" by a replayed model, and the run dir."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"instance_id": i, "question": "Say 1.", "answer": "1"}) + "\n" for i in "ab"))
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"instance_id": i, "turns": [{"content": "<solution>1</solution>"}]}) + "\n"
                              for i in "ab"))
    config = tmp_path / "config.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    out = tmp_path / "out"
    args = ["run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out, "--agent", "plain"]
    return args, out


def test_a_resume_with_nothing_to_do_reads_only_row_keys_and_reuses_the_report(tmp_path):
    args, out = _two_replayed(tmp_path)
    first = harness(*args)
    assert first.returncode == 0, explain(first)
    assert len(rows(out)) == 2
    # Damage a field resuming does not need: a resume must not parse it, nor rebuild the report.
    lines = (out / "output.jsonl").read_text().splitlines()
    damaged = [json.dumps({**json.loads(line), "usage": "not usage"}) for line in lines]
    (out / "output.jsonl").write_text("".join(line + "\n" for line in damaged))
    (out / "report.json").touch()  # newer than output.jsonl, as after a run
    again = harness(*args)
    assert again.returncode == 0, explain(again)
    assert "2 instance(s) already finished, 0 to run" in again.stderr
    # Another selection changes what the report rests on: it is rebuilt from full rows (and finds the damage).
    other = harness(*args, "--limit", 1)
    assert other.returncode == 2 and "corrupt result row" in other.stderr


def test_a_resume_with_nothing_to_do_makes_no_network(tmp_path):
    """The sandboxes' network and firewall rules (the provider's `prepare`: a network list and seven
    iptables commands, ~45 ms) are made only when an instance will run."""
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"instance_id": "a", "question": "Say 1.", "answer": "1"}) + "\n")
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"instance_id": "a", "turns": [{"content": "<solution>1</solution>"}]}) + "\n")
    config = tmp_path / "config.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    mark, out = tmp_path / "prepared", tmp_path / "out"
    args = [mark, "run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
            "--agent", "plain"]
    first = harness(*args, module="tests.helpers.counted_prepare")
    assert first.returncode == 0 and len(rows(out)) == 1, explain(first)
    assert mark.read_text() == "none\n"
    again = harness(*args, module="tests.helpers.counted_prepare")
    assert again.returncode == 0 and "1 instance(s) already finished, 0 to run" in again.stderr, explain(again)
    assert mark.read_text() == "none\n"  # not prepared again


def test_a_resume_with_nothing_to_do_needs_no_engine_and_one_with_work_asks_it_first(tmp_path):
    """Nothing to run: the run re-reports without the engine (runner/phases/idle.py), with the image the
    provider names offline in run.json (had it differed from the preflight's, the resume would be
    refused as "image changed"). An instance left to run goes through the engine's preflight first."""
    args, out = _two_replayed(tmp_path)
    first = harness(*args)
    assert first.returncode == 0 and len(rows(out)) == 2, explain(first)
    image = json.loads((out / "run.json").read_text())["image"]
    gone = {"DOCKER_HOST": f"unix://{tmp_path / 'no-engine.sock'}", "HARNESS_DOCKER_HOST": ""}
    again = harness(*args, env=gone)
    assert again.returncode == 0 and "2 instance(s) already finished, 0 to run" in again.stderr, explain(again)
    assert json.loads((out / "run.json").read_text())["image"] == image
    assert len(json.loads((out / "run.json").read_text())["run_ids"]) == 2
    # ... nor loads the engine's or the sandboxes' HTTP clients (~0.15 s of a start-up of ~0.8 s)
    clients = ("docker", "requests", "urllib3", "httpx")
    code = ("import sys\nfrom harness.cli import app\ntry:\n    app(sys.argv[1:])\nexcept SystemExit as e:\n"
            f"    print('exit', e.code, sorted(m for m in {clients!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                            env={**os.environ, **gone}, timeout=300)
    assert loaded.stdout.strip().endswith("exit 0 []"), explain(loaded)
    lines = (out / "output.jsonl").read_text().splitlines()
    (out / "output.jsonl").write_text(lines[0] + "\n")  # b has no row now: it is to run
    work = harness(*args, env=gone)
    assert work.returncode == 1 and "no Docker engine answers" in work.stderr, explain(work)
    assert (out / "output.jsonl").read_text() == lines[0] + "\n"


def test_a_validated_dataset_is_reused_until_its_file_or_an_attachment_changes(tmp_path, monkeypatch):
    from harness.datasets import dataset_fingerprint

    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    from harness.settings import settings

    settings.cache_clear()
    try:
        (tmp_path / "notes").mkdir()
        (tmp_path / "notes" / "a.txt").write_text("one")
        data = tmp_path / "data.jsonl"
        data.write_text(json.dumps({"instance_id": "x", "question": "q", "answer": "1", "files": ["notes"]}) + "\n")
        first = load.load_dataset(data)
        validated = []
        real = table_rows.instance
        monkeypatch.setattr(table_rows, "instance", lambda *a, **k: validated.append(1) or real(*a, **k))
        again = load.load_dataset(data)
        assert validated == [] and again == first and again.fingerprint == first.fingerprint  # from the cache
        (tmp_path / "notes" / "a.txt").write_text("two!")  # a nested attachment's bytes change
        changed = load.load_dataset(data)
        assert validated == [1] and changed.fingerprint != first.fingerprint
        assert changed.fingerprint == dataset_fingerprint(changed.instances)
        data.write_text(json.dumps({"instance_id": "x", "question": "q2", "answer": "1", "files": ["notes"]}) + "\n")
        assert load.load_dataset(data).instances[0].question == "q2" and validated == [1, 1]
    finally:
        settings.cache_clear()


def test_replay_keys_are_read_off_the_line_head_or_parsed(tmp_path):
    from harness.models.replay import load_turns, turns_for

    path = tmp_path / "replay.jsonl"
    path.write_text(
        json.dumps({"instance_id": 'quote"d', "turns": [{"content": "q"}]}) + "\n"          # --record's own order
        + json.dumps({"instance_id": "e", "epoch": 2, "turns": [{"content": "e2"}]}) + "\n"
        + json.dumps({"turns": [{"content": "late"}], "instance_id": 7}) + "\n")           # another order: parsed
    turns = load_turns(path)
    assert turns_for(turns, 'quote"d') == [{"content": "q"}]
    assert turns_for(turns, "e", 2) == [{"content": "e2"}] and turns_for(turns, "e", 1) is None
    assert turns_for(turns, "7") == [{"content": "late"}]
