"""`harness export --format gaia` of a run of part of its split (--limit, --level) is refused, exit 2,
naming the levels and counts left out, unless --allow-partial (issue 29 item 17: it wrote a partial
leaderboard file without a word). The run directories are written here: no Docker."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from harness.results.model import ResultRow
from harness.results.store import append_row

LEVELS = {"g-1a": 1, "g-1b": 1, "g-1c": 1, "g-2a": 2, "g-2b": 2, "g-3a": 3}


def gaia_split(root: Path) -> Path:
    split = root / "GAIA" / "2023" / "validation"
    split.mkdir(parents=True)
    split.joinpath("metadata.jsonl").write_text("".join(json.dumps(
        {"task_id": iid, "Question": f"question {iid}", "Level": lv, "Final answer": "42", "file_name": ""}) + "\n"
        for iid, lv in LEVELS.items()))
    return root / "GAIA"


def run_of(root: Path, dataset: Path, ids: list[str], selection: dict) -> Path:
    run = root / "run"
    run.mkdir()
    for iid in ids:
        append_row(run / "output.jsonl", ResultRow(instance_id=iid, status="ok", answer="42", target="42",
                                                   level=LEVELS[iid], correct=True))
    (run / "selected.json").write_text(json.dumps({iid: LEVELS[iid] for iid in ids}))
    (run / "run.json").write_text(json.dumps({"dataset": str(dataset), "model": "m", "scorers": ["gaia"],
                                              "selection": selection}))
    return run


def export(run: Path, out: Path, *flags: str):
    return CliRunner().invoke(app, ["export", str(run), "--format", "gaia", "--out", str(out), *flags])


def test_a_limit_run_s_submission_is_refused_naming_what_is_missing(tmp_path, reliability):
    started = time.monotonic()
    run = run_of(tmp_path, gaia_split(tmp_path), ["g-1a", "g-1b"], {"limit": 2})
    out = tmp_path / "submission.jsonl"
    refused = export(run, out)
    assert refused.exit_code == 2, refused.output
    text = " ".join(refused.output.split())
    assert "selected 2 of its split's 6 tasks (--limit 2)" in text, text
    assert "missing: level 1 1 of 3, level 2 2 of 2, level 3 1 of 1" in text and "--allow-partial" in text
    assert not out.exists()
    written = export(run, out, "--allow-partial")
    assert written.exit_code == 0, written.output
    assert "partial leaderboard file" in written.output
    assert [json.loads(line)["task_id"] for line in out.read_text().splitlines()] == ["g-1a", "g-1b"]
    reliability.record("export --format gaia of a --limit 2 run (2 of 6 tasks)",
                       "exit 2 naming the levels left out (level 1 1 of 3, level 2 2 of 2, level 3 1 of 1); "
                       "--allow-partial writes it with a warning", started=started)


def test_a_level_run_is_refused_and_a_whole_split_is_not(tmp_path):
    data = gaia_split(tmp_path)
    run = run_of(tmp_path, data, ["g-2a", "g-2b"], {"level": [2]})
    refused = export(run, tmp_path / "s.jsonl")
    assert refused.exit_code == 2 and "(--level 2)" in refused.output, refused.output
    assert "level 1 3 of 3, level 3 1 of 1" in " ".join(refused.output.split())
    whole = tmp_path / "whole"
    whole.mkdir()
    full = run_of(whole, data, list(LEVELS), {"limit": 100})  # a --limit above the split's size: whole
    done = export(full, tmp_path / "w.jsonl")
    assert done.exit_code == 0 and "partial" not in done.output, done.output


def test_a_partial_run_of_a_dataset_not_readable_here_is_refused_by_its_flags(tmp_path):
    run = run_of(tmp_path, tmp_path / "gone", ["g-1a"], {"limit": 1})
    refused = export(run, tmp_path / "s.jsonl")
    assert refused.exit_code == 2 and "with --limit 1, not its whole split" in " ".join(refused.output.split())
