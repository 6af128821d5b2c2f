"""Bookkeeping that scales: bulk loading with the cyclic garbage collector paused (harness/bulk.py),
scratch files handed over without an fsync."""

from __future__ import annotations

import gc
import json

import pytest

from harness.bulk import collector_paused
from harness.datasets import load_dataset


def test_the_collector_is_paused_inside_and_back_after_even_on_error():
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with collector_paused():
            assert not gc.isenabled()
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_loaded_freezes_what_exists_and_leaving_unfreezes_it():
    with collector_paused() as loaded:
        kept = [object() for _ in range(1000)]
        loaded()
        assert gc.isenabled() and gc.get_freeze_count() >= len(kept)
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_pause_inside_another_leaves_the_decision_to_the_outer_one():
    with collector_paused():
        with collector_paused() as inner:
            inner()  # a no-op: no freeze, the collector stays paused
            assert gc.get_freeze_count() == 0
        assert not gc.isenabled()
    assert gc.isenabled()


def test_loading_a_large_dataset_runs_the_collector_at_most_once_after(tmp_path, monkeypatch):
    """Before: a 20k-row dataset made the collector run hundreds of times over objects that all live on."""
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    from harness.settings import settings

    settings.cache_clear()
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"instance_id": f"i{i}", "question": f"q{i}", "answer": "a"}) + "\n"
                            for i in range(20_000)))
    runs = []
    gc.callbacks.append(collected := lambda phase, info: runs.append(info) if phase == "start" else None)
    try:
        for _ in range(2):  # validated, then from the cache
            assert len(load_dataset(data).instances) == 20_000
    finally:
        gc.callbacks.remove(collected)
        settings.cache_clear()
    assert len(runs) <= 2, len(runs)  # the collections the resumed collector makes once, after a load


def test_a_scratch_handover_is_atomic_without_waiting_on_the_disk(tmp_path, monkeypatch):
    """The agent's result file is read by the harness at once: written atomically, not fsynced
    (an fsync per instance cost the agent process a wait on the disk)."""
    import os

    from harness.fsutil import write_atomic

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    write_atomic(tmp_path / "result.json", "{}", durable=False)
    assert synced == [] and (tmp_path / "result.json").read_text() == "{}"
    write_atomic(tmp_path / "row.json", "{}")
    assert len(synced) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json", "row.json"]  # no temporary left
