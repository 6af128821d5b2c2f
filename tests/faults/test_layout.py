"""Inputs refused at validation, before any container (issue 18 items 5 and 11).

An output directory inside a folder that instances attach was packed into later instances'
sandboxes: other agents' request files (live sandbox tokens) and finished traces (targets in
their verdict events). That layout is refused, naming both. A header-only CSV was reported as
missing the columns its header has.
"""

from __future__ import annotations

import json
import time

from tests.helpers.e2e import containers_of, explain, harness, out_dir, replay_instance

DONE = {"content": "<solution>x</solution>", "usage": {"prompt_tokens": 10, "completion_tokens": 3}}


def test_an_output_dir_inside_an_attached_folder_exits_2_before_any_container(tmp_path, reliability):
    folder = tmp_path / "data"
    data, config = replay_instance(folder, "a", "q", "x", [DONE])
    (folder / "docs").mkdir()
    (folder / "docs" / "notes.txt").write_text("notes")
    data.write_text("".join(json.dumps({"instance_id": i, "question": "q", "answer": "x", "files": ["docs"]}) + "\n"
                            for i in ("a", "b")))
    (folder / "turns.jsonl").write_text("".join(json.dumps({"instance_id": i, "turns": [DONE]}) + "\n"
                                                for i in ("a", "b")))
    out = out_dir(folder / "docs")  # its name, the run id's prefix containers_of matches, unique: `run` matched the
    # containers of every other test's run into a folder named run (3 counted as leaked once, under load)
    t0 = time.monotonic()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out)
    leaked = len(containers_of(out))
    reliability.record("--output-dir inside a folder the instances attach",
                       f"exit {proc.returncode} before any container", leaked=leaked, started=t0)
    assert proc.returncode == 2, explain(proc)
    (message,) = [line for line in proc.stderr.splitlines() if "--output-dir" in line]
    assert str(out) in message and str((folder / "docs").resolve()) in message and "'docs'" in message, message
    assert not out.exists() and leaked == 0


def test_a_header_only_csv_exits_2_saying_it_has_no_rows(tmp_path, reliability):
    data = tmp_path / "tasks.csv"
    data.write_text("instance_id,question,answer,files\n")
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = harness("run", "--dataset", data, "--model", "replay", "--output-dir", out)
    reliability.record("header-only CSV dataset", f"exit {proc.returncode}: "
                       + ("no rows" if "no rows" in proc.stderr else "MISREPORTED"), started=t0)
    assert proc.returncode == 2, explain(proc)
    assert "no rows (only a header: instance_id, question, answer, files)" in proc.stderr, explain(proc)
    assert "missing" not in proc.stderr and not out.exists()
