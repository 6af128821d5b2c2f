"""--cache DIR (harness/models/cache.py): a request asked before is answered from the cache, not the provider.

The key's rules as pure logic; the real clients (the plain runner's chat model, AutoGen's through
MeteredClient) against the fake OpenAI server; and `harness run` twice with one cache, the second
making no chat request at all (real sandboxes, real agent processes).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.agents.autogen.models import build_client
from harness.errors import InputError
from harness.models.cache import ResponseCache
from harness.models.config import ModelSection
from harness.models.factory import chat_model
from harness.models.meter import Meter
from harness.traces import Tracer, read_events
from harness.usage import Price
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.test_model_concurrency import prefix  # noqa: F401, F811 - the fixture: its containers gone at the end

KEY_ENV = "FAKE_CACHE_KEY"
CODE = {"type": "object", "properties": {"code": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": "run_python", "description": "Run it.", "parameters": CODE}}]


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")


def section(base_url: str = "http://127.0.0.1:1/v1", **extra) -> ModelSection:
    return ModelSection(name="m", base_url=base_url, api_key_env=KEY_ENV,
                        **{"model": "fake-model-1", "max_retries": 0, "timeout": 20, **extra})


# -- the key ---------------------------------------------------------------------------------------------

def conversation(result: str, call_id: str) -> list[dict]:
    return [{"role": "user", "content": "sum it"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "run_python", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": result}]


def test_the_key_masks_what_changes_between_runs_and_keeps_what_defines_the_request(tmp_path):
    cache = ResponseCache(tmp_path)
    made = section()
    base = cache.key(made, conversation("exit code: 0\nTOTAL=4584 in 0.41 s at 12:03:44", "call_a1"), TOOLS, {})
    # the volatile parts of a tool result (a duration, a clock time) and the random call ids: the same key
    assert cache.key(made, conversation("exit code: 0\nTOTAL=4584 in 1.9 s at 09:00:01", "call_zz"), TOOLS, {}) == base
    # what defines the request: another key
    assert cache.key(made, conversation("exit code: 0\nTOTAL=4585 in 0.41 s at 12:03:44", "call_a1"),
                     TOOLS, {}) != base
    assert cache.key(made, conversation("exit code: 0\nTOTAL=4584 in 0.41 s at 12:03:44", "call_a1"), [], {}) != base
    assert cache.key(section(temperature=0.7), conversation("exit code: 0\nTOTAL=4584", "c"), TOOLS, {}) != \
        cache.key(made, conversation("exit code: 0\nTOTAL=4584", "c"), TOOLS, {})
    assert cache.key(section(model="other"), conversation("x", "c"), TOOLS, {}) != \
        cache.key(made, conversation("x", "c"), TOOLS, {})
    assert ResponseCache(tmp_path, epoch=2).key(made, conversation("x", "c"), TOOLS, {}) != \
        cache.key(made, conversation("x", "c"), TOOLS, {})  # each epoch its own sample
    assert cache.key(made, conversation("x", "c"), TOOLS, {"json_output": True}) != \
        cache.key(made, conversation("x", "c"), TOOLS, {})
    # two pictures differing in bytes are two requests (data URLs are not normalised)
    def picture(data: str) -> list[dict]:
        part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
        return [{"role": "user", "content": [part]}]

    assert cache.key(made, picture("AAAA1111"), [], {}) != cache.key(made, picture("AAAA2222"), [], {})


def test_an_entry_round_trips_and_an_unreadable_one_is_a_miss(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put("ab" + "0" * 62, "m", {"content": "hi", "usage": {"prompt_tokens": 3}})
    assert cache.get("ab" + "0" * 62) == {"content": "hi", "usage": {"prompt_tokens": 3}}
    assert cache.get("cd" + "0" * 62) is None
    cache.path("ef" + "0" * 62).parent.mkdir(parents=True)
    cache.path("ef" + "0" * 62).write_text('{"key": "ef')  # torn
    assert cache.get("ef" + "0" * 62) is None
    assert [p.name for p in (tmp_path / "ab").iterdir()] == ["ab" + "0" * 62 + ".json"]  # no temporary left


def test_cache_judge_needs_cache(tmp_path):
    from harness.config import Replay

    with pytest.raises(ValueError, match="--cache-judge needs --cache DIR"):
        Replay(cache_judge=True)
    assert Replay(cache=tmp_path, cache_judge=True).cache == tmp_path
    assert issubclass(InputError, Exception)


# -- the real clients ------------------------------------------------------------------------------------

async def ask(runner: str, made: ModelSection, meter: Meter, messages: list[dict]) -> str:
    if runner == "plain":
        chat = chat_model(made, meter, None)
        try:
            reply = await chat.complete(messages, TOOLS)
            return reply.content or json.dumps([c["name"] for c in reply.tool_calls])
        finally:
            await chat.close()
    from autogen_core.models import UserMessage

    client = build_client(made.model_copy(update={"model_info": {"function_calling": True}}), meter, None)
    try:
        result = await client.create([UserMessage(content=m["content"], source="user") for m in messages])
        return result.content if isinstance(result.content, str) else json.dumps([c.name for c in result.content])
    finally:
        await client.close()


@pytest.mark.parametrize("runner", ["plain", "autogen"])
def test_a_request_asked_again_is_answered_from_the_cache(runner, tmp_path):
    question = [{"role": "user", "content": "what is 6 * 7?"}]
    with FakeOpenAI([text("<solution>42</solution>", usage=(30, 4)),
                     tool_calls(("run_python", {"code": "1"}), usage=(31, 5))]) as server:
        made = section(server.base_url, price_input_per_1k=1.0, price_output_per_1k=2.0)
        first = Meter(max_tokens=None, max_steps=None, cache=ResponseCache(tmp_path / "cache"), price=Price.of(made),
                      tracer=Tracer(tmp_path / "a.jsonl"))
        assert asyncio.run(ask(runner, made, first, question)) == "<solution>42</solution>"
        again = Meter(max_tokens=None, max_steps=None, cache=ResponseCache(tmp_path / "cache"), price=Price.of(made),
                      tracer=Tracer(tmp_path / "b.jsonl"))
        assert asyncio.run(ask(runner, made, again, question)) == "<solution>42</solution>"
        assert len(server.chat_requests) == 1  # the second was answered from the cache
        # another question is a miss: asked, and kept
        assert asyncio.run(ask(runner, made, again, [{"role": "user", "content": "run it"}])) == '["run_python"]'
        assert len(server.chat_requests) == 2
        epoch2 = Meter(max_tokens=None, max_steps=None, cache=ResponseCache(tmp_path / "cache", epoch=2))
        with pytest.raises(Exception):  # noqa: B017 - epoch 2 is a miss: the server's script is used up (400)
            asyncio.run(ask(runner, made, epoch2, question))
    assert first.usage().cache_hits == 0 and first.usage().cost > 0
    hit = again.usage()
    assert hit.llm_calls == 2 and hit.cache_hits == 1
    assert hit.prompt_tokens == 30 + 31  # a hit's tokens count, as the reply said
    assert hit.cost == pytest.approx((31 * 1.0 + 5 * 2.0) / 1000)  # the hit at no cost, the miss at its price
    calls = [e for e in read_events(tmp_path / "b.jsonl") if e["type"] == "model_call"]
    assert [c["cached"] for c in calls] == [True, False]
    assert calls[0]["content"] == "<solution>42</solution>"
    assert not [e for e in read_events(tmp_path / "b.jsonl") if e["type"] == "model_call_started"][1:]  # one went out


def test_a_replay_model_is_never_cached(tmp_path):
    replay = ModelSection(name="replay", kind="replay", path="x")
    meter = Meter(max_tokens=None, max_steps=None, cache=ResponseCache(tmp_path))
    chat = chat_model(replay, meter, [{"content": "a"}])
    assert asyncio.run(chat.complete([{"role": "user", "content": "q"}], [])).content == "a"
    assert meter.usage().cache_hits == 0 and not list(tmp_path.iterdir())


def test_the_judge_uses_the_cache_only_when_asked(tmp_path):
    from harness.models.completion import completer

    with FakeOpenAI([text("CORRECT", usage=(40, 2)), text("CORRECT", usage=(40, 2))]) as server:
        made = section(server.base_url, price_input_per_1k=1.0, price_output_per_1k=2.0)
        judge = completer(made, tmp_path / "cache")
        first, again = judge("grade 7 against 7"), judge("grade 7 against 7")
        assert len(server.chat_requests) == 1  # --cache-judge: the second answered from the cache
        plain = completer(made)  # without --cache-judge: the provider every time
        assert plain("grade 7 against 7") == "CORRECT" and len(server.chat_requests) == 2
    assert first == again == "CORRECT"
    assert first.usage.cache_hits == 0 and first.usage.cost > 0
    assert again.usage.cache_hits == 1 and again.usage.cost == 0 and again.usage.prompt_tokens == 40


# -- `harness run` twice with one cache --------------------------------------------------------------------

@pytest.mark.docker
@pytest.mark.parametrize("agent", ["plain", "assistant"])
def test_a_rerun_with_the_cache_makes_no_request(tmp_path, image, prefix, agent):  # noqa: F811
    from tests.helpers.e2e import FAKE_KEY, FAKE_KEY_ENV, explain, fake_config, harness, rows, trace

    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text(json.dumps({"instance_id": f"{prefix}-1", "question": "What is 3 + 4?", "answer": "7"}) + "\n")
    cache = tmp_path / "cache"

    def run(server: FakeOpenAI, out: Path) -> subprocess.CompletedProcess:
        config = fake_config(tmp_path / "models.toml", server.base_url, prices=(1.0, 2.0))
        return harness("run", "--dataset", dataset, "--model", "fake", "--agent", agent, "--config", config,
                       "--output-dir", out, "--workers", 1, "--instance-timeout", 90, "--cache", cache,
                       env={**os.environ, FAKE_KEY_ENV: FAKE_KEY}, timeout=240)

    script = [tool_calls(("run_python", {"code": "print(3 + 4)"}), usage=(50, 10)),
              text("<solution>7</solution>", usage=(70, 5))]
    with FakeOpenAI(script) as server:  # one server: the endpoint is part of the key
        first = run(server, tmp_path / "first")
        assert first.returncode == 0, explain(first)
        assert len(server.chat_requests) == 2
        (row,) = rows(tmp_path / "first")
        assert row["correct"] is True and row["usage"]["cache_hits"] == 0 and row["usage"]["cost"] > 0
        # The same run again, its script used up: every call is answered from the cache (the tool
        # result is the run's own: the sandbox ran the code again).
        second = run(server, tmp_path / "second")
    assert second.returncode == 0, explain(second)
    assert len(server.chat_requests) == 2 and server.exhausted == 0  # not one more chat request
    (again,) = rows(tmp_path / "second")
    assert again["correct"] is True and again["answer"] == "7"
    assert again["usage"]["llm_calls"] == 2 and again["usage"]["cache_hits"] == 2 and again["usage"]["cost"] == 0
    calls = [e for e in trace(tmp_path / "second", again) if e["type"] == "model_call"]
    assert [c["cached"] for c in calls] == [True, True]
    assert any(e["type"] == "tool_result" and "7" in e["content"] for e in trace(tmp_path / "second", again))
    report = json.loads((tmp_path / "second" / "report.json").read_text())
    assert report["cache_hits"] == 2 and report["llm_calls"] == 2
    assert "2 answered by --cache" in second.stdout, explain(second)
