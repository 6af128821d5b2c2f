"""Issue 21's "an Anthropic section runs the smoke set offline", on the anthropic SDK path itself: the
smoke recording's replies (datasets/gaia-smoke/replay.jsonl) served in the Messages API's wire format
(tool_use blocks: tests/fakes/providers.py's FakeAnthropic), each instance's own from its own queue,
to a `provider = "anthropic"` section (the default AutoGen agent: AutoGen's Anthropic client over the
anthropic SDK) running a few smoke instances in real sandboxes. The replay model would need no
provider at all; this shows the real client carrying the same run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.datasets import load_dataset
from tests.fakes.openai_server import Item, text, tool_calls
from tests.fakes.providers import FakeAnthropic
from tests.helpers.e2e import containers_of, explain, harness, out_dir, rows

SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"
KEY = "sk-ant-fake-smoke"
# Existing file and code instances (others are being added to the set): an xlsx, a csv, no attachment.
IDS = ("e2509efa-62fd-5994-b70b-e04e13ddc56c", "c4eea2af-0a09-5074-981e-18781a06799d",
       "cea369f5-6545-5e4f-9006-a6e7a6c3d3f5")


def as_items(turns: list[dict]) -> list[Item]:
    """A recording's turns as the fake's script items (usage as recorded)."""
    items = []
    for turn in turns:
        usage = (turn["usage"]["prompt_tokens"], turn["usage"]["completion_tokens"])
        calls = [(c["name"], c["arguments"]) for c in turn.get("tool_calls") or []]
        items.append(tool_calls(*calls, usage=usage) if calls else text(turn["content"], usage=usage))
    return items


class PerInstance(FakeAnthropic):
    """Answers each request from the queue of the instance whose question its first message carries."""

    def __init__(self, queues: dict[str, list[Item]], questions: dict[str, str], **kwargs: Any):
        super().__init__([], **kwargs)
        self.queues, self.questions = queues, {iid: json.dumps(q)[1:-1] for iid, q in questions.items()}

    def respond_chat(self, body: Any, item: Item | None = None) -> tuple[int, Any, dict]:
        first = json.dumps((body.get("messages") or [None])[0]) if isinstance(body, dict) else ""
        owner = next((iid for iid, q in self.questions.items() if q in first), None)
        with self._lock:
            item = item or (self.queues[owner].pop(0) if owner is not None and self.queues[owner] else None)
        return super().respond_chat(body, item)


@pytest.mark.docker
@pytest.mark.slow  # three sandboxes, two workers (~40 s on a loaded 2-core machine)
def test_an_anthropic_section_runs_smoke_instances_from_the_recorded_replies(tmp_path, image):
    recorded = {r["instance_id"]: r["turns"] for r in map(json.loads, (SMOKE / "replay.jsonl").open())
                if r["instance_id"] in IDS and r.get("epoch") in (None, 1)}
    instances = {i.instance_id: i for i in load_dataset(SMOKE, "validation") if i.instance_id in IDS}
    assert sorted(recorded) == sorted(instances) == sorted(IDS)
    out = out_dir(tmp_path)
    with PerInstance({iid: as_items(t) for iid, t in recorded.items()},
                     {iid: i.question for iid, i in instances.items()}, key=KEY) as server:
        (tmp_path / "models.toml").write_text(f'[llm.claude]\nprovider = "anthropic"\nmodel = "{server.model}"\n'
                                              f'base_url = "{server.base_url}"\nmax_retries = 0\ntimeout = 30\n')
        proc = harness("run", "--dataset", SMOKE, "--model", "claude", "--config", tmp_path / "models.toml",
                       "--ids", ",".join(IDS), "--workers", 2, "--instance-timeout", 180, "--output-dir", out,
                       env={"ANTHROPIC_API_KEY": KEY})
        requests = [r["json"] for r in server.chat_requests]
        left = {iid: len(q) for iid, q in server.queues.items()}
    assert proc.returncode == 0, explain(proc)
    assert len(server.probes) == 1 and server.exhausted == 0 and left == dict.fromkeys(IDS, 0)
    got = {r["instance_id"]: r for r in rows(out)}
    assert sorted(got) == sorted(IDS) and all(r["correct"] is True for r in got.values()), got
    for iid, row in got.items():
        assert row["tool_calls"] == [c["name"] for t in recorded[iid] for c in t.get("tool_calls") or []]
        # the last request of the instance carries its run_python's real output, the answer among it
        asked = [b for b in requests if json.dumps(instances[iid].question)[1:-1] in json.dumps(b["messages"][0])]
        answered = asked[-1]["messages"][-1]["content"]
        assert isinstance(answered, list) and answered[0]["type"] == "tool_result", answered
        assert str(instances[iid].answer) in json.dumps(answered), (iid, answered)
    assert containers_of(out) == []
