"""Issue 21's "an Anthropic section runs the smoke set offline", on the anthropic SDK path itself: the
smoke recording's replies (datasets/gaia-smoke/replay.jsonl) served in the Messages API's wire format
(tool_use blocks: tests/fakes/providers.py's FakeAnthropic), each instance's own from its own queue,
to a `provider = "anthropic"` section (the default AutoGen agent: AutoGen's Anthropic client over the
anthropic SDK, vision on) running the smoke set in real sandboxes with its offline site: files and code,
browsing, search and the chart picture. All but the audio task: a transcription model needs an OpenAI-
compatible endpoint, which Anthropic has not (models/config.py refuses it). The replay model would need
no provider at all; this shows the real client carrying the same run."""

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
AUDIO = "3546c9b5"  # the voice memo: transcribe_audio is not offered to an anthropic section
CHART = "4150ac96"  # its recording answers only when the picture was sent
RECORDED_WRONG = ("964d85c4", "5a79f795")  # the recording's own wrong answers (tests/test_sandboxed_agent.py)


def as_items(turns: list[dict]) -> list[Item]:
    """A recording's turns as the fake's script items (usage as recorded)."""
    items = []
    for turn in turns:
        usage = (turn["usage"]["prompt_tokens"], turn["usage"]["completion_tokens"])
        calls = [(c["name"], c["arguments"]) for c in turn.get("tool_calls") or []]
        items.append(tool_calls(*calls, usage=usage) if calls else text(turn["content"], usage=usage))
    return items


class PerInstance(FakeAnthropic):
    """Answers each request from the queue of the instance whose question its first message carries; an
    instance asking again after its recording's last reply (a final message without <solution>, which
    the agent is asked to finish) gets that last reply again, as a model would answer in kind."""

    def __init__(self, queues: dict[str, list[Item]], questions: dict[str, str], **kwargs: Any):
        super().__init__([], **kwargs)
        self.queues, self.questions = queues, {iid: json.dumps(q)[1:-1] for iid, q in questions.items()}
        self.last: dict[str, Item] = {}

    def respond_chat(self, body: Any, item: Item | None = None) -> tuple[int, Any, dict]:
        first = json.dumps((body.get("messages") or [None])[0]) if isinstance(body, dict) else ""
        owner = next((iid for iid, q in self.questions.items() if q in first), None)
        with self._lock:
            queue = self.queues.get(owner) if owner is not None else None
            if queue:
                self.last[owner] = queue.pop(0)
            item = item or (self.last.get(owner) if owner is not None else None)
        return super().respond_chat(body, item)


@pytest.mark.docker
@pytest.mark.slow  # twenty sandboxes and the site, two workers (~1-2 min)
def test_an_anthropic_section_runs_the_smoke_set_from_the_recorded_replies(tmp_path, image):
    instances = {i.instance_id: i for i in load_dataset(SMOKE, "validation").instances
                 if not i.instance_id.startswith(AUDIO)}
    recorded = {r["instance_id"]: r["turns"] for r in map(json.loads, (SMOKE / "replay.jsonl").open())
                if r["instance_id"] in instances and r.get("epoch") in (None, 1)}
    assert sorted(recorded) == sorted(instances) and len(instances) == 20
    out = out_dir(tmp_path)
    with PerInstance({iid: as_items(t) for iid, t in recorded.items()},
                     {iid: i.question for iid, i in instances.items()}, key=KEY) as server:
        (tmp_path / "models.toml").write_text(f'[llm.claude]\nprovider = "anthropic"\nmodel = "{server.model}"\n'
                                              f'base_url = "{server.base_url}"\nmax_retries = 0\ntimeout = 30\n'
                                              '[llm.claude.model_info]\nvision = true\nfunction_calling = true\n'
                                              'json_output = true\nfamily = "unknown"\n')
        proc = harness("run", "--dataset", SMOKE, "--model", "claude", "--config", tmp_path / "models.toml",
                       "--ids", ",".join(instances), "--workers", 2, "--instance-timeout", 180,
                       "--website", SMOKE / "website", "--output-dir", out, env={"ANTHROPIC_API_KEY": KEY})
        requests = [r["json"] for r in server.chat_requests]
        left = {iid: len(q) for iid, q in server.queues.items()}
    assert proc.returncode == 0, explain(proc)
    assert len(server.probes) == 1 and server.exhausted == 0 and left == dict.fromkeys(instances, 0)
    got = {r["instance_id"]: r for r in rows(out)}
    assert sorted(got) == sorted(instances) and all(r["status"] == "ok" for r in got.values()), got
    wrong = sorted(iid[:8] for iid, r in got.items() if not r["correct"])
    assert wrong == sorted(RECORDED_WRONG), wrong
    for iid, row in got.items():
        assert row["tool_calls"] == [c["name"] for t in recorded[iid] for c in t.get("tool_calls") or []]
    by_instance = {iid: [b for b in requests if json.dumps(i.question)[1:-1] in json.dumps(b["messages"][0])]
                   for iid, i in instances.items()}
    chart = next(iid for iid in instances if iid.startswith(CHART))
    assert any(block.get("type") == "image" for block in by_instance[chart][0]["messages"][0]["content"])
    for iid, asked in by_instance.items():  # each code task's last request carries its run_python's real output
        calls = [c["name"] for t in recorded[iid] for c in t.get("tool_calls") or []]
        if calls and calls[-1] == "run_python" and iid[:8] not in RECORDED_WRONG:
            answered = asked[-1]["messages"][-1]["content"]
            assert isinstance(answered, list) and answered[0]["type"] == "tool_result", answered
            assert str(instances[iid].answer) in json.dumps(answered), (iid, answered)
    assert containers_of(out) == []
