"""Layouts of the run's own files that leak into containers (issue 18 item 5).

An output directory inside a folder that instances attach was packed into later instances'
sandboxes: other agents' request files (live sandbox tokens) and finished traces (targets in
their verdict events). That layout is refused at validation, before any container, naming both.
"""

from __future__ import annotations

import json
import time

from tests.helpers.e2e import containers_of, explain, harness, replay_instance

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
    out = folder / "docs" / "run"
    t0 = time.monotonic()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out)
    leaked = len(containers_of(out))
    reliability.record("--output-dir inside a folder the instances attach",
                       f"exit {proc.returncode} before any container", leaked=leaked, started=t0)
    assert proc.returncode == 2, explain(proc)
    (message,) = [line for line in proc.stderr.splitlines() if "--output-dir" in line]
    assert str(out) in message and str((folder / "docs").resolve()) in message and "'docs'" in message, message
    assert not out.exists() and leaked == 0
