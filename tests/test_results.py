from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.results.model import ResultRow
from harness.results.store import append_row, latest_by_key, load, pending, read_rows, repair
from harness.runner.run_config import RunConfig, lock_output_dir, save_or_check


def row(iid: str, status: str = "ok", **kw) -> ResultRow:
    return ResultRow(instance_id=iid, status=status, **kw)


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "output.jsonl"
    rows = [row("a", correct=True, answer="42"), row("b", "error", error_kind="infra")]
    for r in rows:
        append_row(path, r)
    data = path.read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 2
    assert read_rows(path) == rows


def test_missing_file(tmp_path: Path) -> None:
    assert read_rows(tmp_path / "nope.jsonl") == []
    assert repair(tmp_path / "nope.jsonl") is False


@pytest.mark.parametrize("tail", [b'{"instance_id": "c", "sta', b"garbage\n"])
def test_torn_last_line_tolerated_and_repaired(tmp_path: Path, tail: bytes, caplog) -> None:
    path = tmp_path / "output.jsonl"
    append_row(path, row("a"))
    append_row(path, row("b"))
    with open(path, "ab") as fh:
        fh.write(tail)
    with caplog.at_level("WARNING"):
        assert [r.instance_id for r in read_rows(path)] == ["a", "b"]
    assert "torn" in caplog.text
    assert load(path).torn
    assert repair(path) is True
    assert repair(path) is False
    append_row(path, row("c"))
    assert [r.instance_id for r in read_rows(path)] == ["a", "b", "c"]
    assert not load(path).torn


def test_corrupt_middle_line_names_line(tmp_path: Path) -> None:
    path = tmp_path / "output.jsonl"
    append_row(path, row("a"))
    with open(path, "ab") as fh:
        fh.write(b'{"broken": \n')
    append_row(path, row("b"))
    with pytest.raises(InputError, match=r"output\.jsonl:2"):
        read_rows(path)


def test_latest_wins_and_pending() -> None:
    rows = [
        row("a", "error", error_kind="infra"),
        row("a", "ok", correct=True),
        row("b", "ok"),
        row("b", "error", error_kind="model"),
        row("c", "limit", limit="max_steps"),
        row("d", "error", error_kind="agent"),
    ]
    latest = latest_by_key(rows)
    assert latest["a", 1].status == "ok" and latest["b", 1].status == "error"
    to_run, done = pending(["a", "b", "c", "d", "e"], rows)
    assert to_run == [("b", 1), ("d", 1), ("e", 1)]
    assert done == [("a", 1), ("c", 1)]


def test_epochs_are_resumed_one_by_one() -> None:
    rows = [row("a", "ok"), row("a", "error", error_kind="infra").model_copy(update={"epoch": 2}),
            row("b", "ok").model_copy(update={"epoch": 3}), row("a", "ok").model_copy(update={"epoch": 3})]
    to_run, done = pending(["a", "b"], rows, epochs=3)
    assert to_run == [("a", 2), ("b", 1), ("b", 2)]
    assert done == [("a", 1), ("a", 3), ("b", 3)]


def test_concurrent_appends(tmp_path: Path) -> None:
    path = tmp_path / "output.jsonl"

    def work(t: int) -> None:
        for i in range(50):
            append_row(path, row(f"t{t}-{i}", answer="x" * 500))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = path.read_bytes().split(b"\n")
    assert lines.pop() == b""
    assert len(lines) == 400
    ids = {ResultRow.model_validate_json(line).instance_id for line in lines}
    assert len(ids) == 400


def config(**kw) -> RunConfig:
    base = dict(
        dataset="data/gaia.jsonl",
        dataset_fingerprint="abc",
        model="gpt-a",
        model_settings={"name": "gpt-a", "temperature": 0},
        agent="react",
        image="harness/sandbox:1",
        limits={"instance_timeout": 600, "max_steps": 30, "max_tokens": 100000},
        scorers=["gaia"],
        selection={"limit": 10},
    )
    return RunConfig(**{**base, **kw})


def test_fingerprint_ignores_selection() -> None:
    assert config().fingerprint() == config(selection={"limit": 50, "shuffle": True}).fingerprint()
    assert config().fingerprint() == config(dataset="/elsewhere/gaia.jsonl").fingerprint()


@pytest.mark.parametrize(
    "change",
    [
        {"model": "gpt-b"},
        {"image": "harness/sandbox:2"},
        {"dataset_fingerprint": "def"},
        {"limits": {"instance_timeout": 600, "max_steps": 50, "max_tokens": 100000}},
        {"model_settings": {"name": "gpt-a", "temperature": 1}},
        {"agent": "other"},
        {"scorers": ["gaia", "judge"]},
    ],
)
def test_fingerprint_changes(change: dict) -> None:
    assert config().fingerprint() != config(**change).fingerprint()


def test_save_or_check(tmp_path: Path) -> None:
    out = tmp_path / "run"
    save_or_check(out, config(), force=False)
    assert json.loads((out / "run.json").read_text())["model"] == "gpt-a"
    save_or_check(out, config(selection={"limit": 99}), force=False)  # widening is fine
    changed = config(
        model="gpt-b",
        image="harness/sandbox:2",
        limits={"instance_timeout": 600, "max_steps": 50, "max_tokens": 100000},
    )
    with pytest.raises(InputError) as err:
        save_or_check(out, changed, force=False)
    msg = str(err.value)
    assert "refusing to resume" in msg and str(out) in msg and "--force" in msg
    assert "model changed (gpt-a -> gpt-b)" in msg
    assert "image changed (harness/sandbox:1 -> harness/sandbox:2)" in msg
    assert "limits.max_steps changed (30 -> 50)" in msg
    assert "dataset_fingerprint" not in msg
    save_or_check(out, changed, force=True)
    assert json.loads((out / "run.json").read_text())["model"] == "gpt-b"
    assert json.loads((out / "run.json.prev").read_text())["model"] == "gpt-a"
    save_or_check(out, changed, force=False)  # now consistent


def test_unreadable_run_json(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(InputError, match="unreadable"):
        save_or_check(tmp_path, config(), force=False)
    save_or_check(tmp_path, config(), force=True)


HOLDER = """
import sys, time
from harness.runner.run_config import lock_output_dir
with lock_output_dir(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_output_dir_lock_refuses_second_holder(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match="another harness run is writing to"):
            with lock_output_dir(tmp_path):
                pass
    finally:
        proc.communicate("\n", timeout=10)
    with lock_output_dir(tmp_path):  # free again once the holder exits
        pass
