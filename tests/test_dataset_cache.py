"""The validated-dataset cache (harness/datasets/cache.py): what it keeps of an instance is every field of it.

A hand-kept list of the fields once missed one added to Instance (`workdir`): the entry was written without it
and every read of it failed (a resume, a re-score, a second shard of any cached dataset), so each field set to a
value of its own must come back as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.datasets import cache
from harness.datasets.model import Instance, JudgeSandbox
from harness.settings import settings


@pytest.fixture
def state(tmp_path, monkeypatch):
    """The cache's entries in a folder of the test's own (HARNESS_STATE_DIR), the settings re-read before and after."""
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    settings.cache_clear()
    yield
    monkeypatch.undo()
    settings.cache_clear()


def test_every_field_of_an_instance_comes_back_from_the_cache(tmp_path, state):
    data = tmp_path / "tasks.jsonl"
    data.write_text("{}\n")
    (tmp_path / "a.txt").write_text("a")
    given = Instance(instance_id="t1", question="q", answer="a", files=["a.txt"], root=tmp_path, level=2,
                     metadata={"k": "v"}, expected_tool_calls=["run_shell"], max_steps=3, max_tokens=40,
                     image="sandbox", timeout=12.5, build_timeout=30.0, cpus=2.0, memory="1g", network="none",
                     user="worker", workdir="/app", judge_sandbox=JudgeSandbox(user="checker"), env={"A": "1"},
                     benchmark="harbor")
    assert set(given.model_fields_set) == set(Instance.model_fields)  # every field given a value of its own
    cache.put(data, None, [given])
    got = cache.get(data, None)
    assert got is not None, "the entry just written is not read back"
    assert [i.model_dump() for i in got.instances] == [given.model_dump()]
    assert Path(got.instances[0].root) == tmp_path
    assert list((tmp_path / "state" / "datasets").iterdir())  # the entry is where the test put it
