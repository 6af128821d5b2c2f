"""The per-model cap on calls in flight (harness/models/slots.py, `max_connections`) and 429 handling.

Unit tests: the slot semaphore across real processes (a SIGKILLed holder included), the
Meter's wait for a slot, the config key; the real OpenAI clients (plain runner's OpenAIChat
and AutoGen's OpenAIChatCompletionClient behind MeteredClient) against the fake server over
HTTP. The end-to-end runs (`harness run`, real sandboxes and agent processes) are in
tests/test_model_concurrency.py.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from harness.errors import InputError, ModelError
from harness.models.config import DEFAULT_MAX_CONNECTIONS, ModelSection, model_section
from harness.models.meter import Meter
from harness.models.slots import Slots, slots_directory
from harness.traces import Tracer
from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers.wait import wait_for

KEY_ENV = "FAKE_OPENAI_KEY_SLOTS"

CTX = multiprocessing.get_context("fork")  # separate processes, as the agent processes are (and quick to start)


# -- the semaphore across processes ---------------------------------------------------------------

def _hold_and_count(directory: str, count: int, hold: float, current, peak, lock, taken, go) -> None:
    go.wait(30)  # all start together

    async def main() -> None:
        slot = await Slots(directory, count).acquire(timeout=30)
        with lock:
            current.value += 1
            peak.value = max(peak.value, current.value)
        # Until the cap was reached once (the first `count` holders overlap whatever the load), then
        # `hold` more: time in which a holder over the cap would show.
        wait_for(lambda: peak.value >= count, 30, f"{count} holders at once")
        time.sleep(hold)
        with lock:
            current.value -= 1
            taken.value += 1
        slot.release()

    asyncio.run(main())


@pytest.mark.parametrize("count", [1, 2, 3])
def test_no_more_processes_hold_slots_than_there_are(tmp_path, count):
    current, peak, taken = CTX.Value("i", 0), CTX.Value("i", 0), CTX.Value("i", 0)
    lock, go = CTX.Lock(), CTX.Event()
    procs = [CTX.Process(target=_hold_and_count, args=(str(tmp_path), count, 0.3, current, peak, lock, taken, go))
             for _ in range(6)]
    for proc in procs:
        proc.start()
    go.set()
    for proc in procs:
        proc.join(60)
    assert [p.exitcode for p in procs] == [0] * 6
    assert taken.value == 6  # every waiter got a slot in the end
    assert peak.value == count  # never more than the cap, and the cap was used
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"slot-{i}.lock" for i in range(count)]


def _hold_forever(directory: str, ready) -> None:
    slot = Slots(directory, 1).try_acquire()
    assert slot is not None
    ready.set()
    time.sleep(600)


def test_a_sigkilled_holder_frees_its_slot(tmp_path):
    ready = CTX.Event()
    holder = CTX.Process(target=_hold_forever, args=(str(tmp_path), ready))
    holder.start()
    try:
        assert ready.wait(30)
        slots = Slots(tmp_path, 1)
        assert slots.try_acquire() is None  # held by the other process
        with pytest.raises(TimeoutError):
            asyncio.run(slots.acquire(timeout=0.3))
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(10)
        assert holder.exitcode == -signal.SIGKILL
        started = time.monotonic()
        slot = asyncio.run(slots.acquire(timeout=5))
        assert time.monotonic() - started < 2.0
        assert slot.held and slot.index == 0
        slot.release()
        assert not slot.held
    finally:
        if holder.is_alive():
            holder.kill()
            holder.join(10)


def test_waiting_ends_at_the_timeout_and_takes_a_freed_slot_soon(tmp_path):
    slots = Slots(tmp_path, 2)
    first, second = slots.try_acquire(), slots.try_acquire()
    assert first and second and {first.index, second.index} == {0, 1}
    assert slots.try_acquire() is None
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        asyncio.run(slots.acquire(timeout=0.4))
    assert 0.4 <= time.monotonic() - started < 1.0  # the timeout holds, no long oversleeping

    async def free_later() -> float:
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, second.release)
        t0 = time.monotonic()
        slot = await slots.acquire(timeout=5)
        waited = time.monotonic() - t0
        assert slot.index == second.index  # the one freed
        slot.release()
        return waited

    waited = asyncio.run(free_later())
    assert 0.3 <= waited < 0.9  # polled, and not slept past the release for long
    first.release()


def test_each_model_has_its_own_slots(tmp_path):
    a, b = slots_directory(tmp_path, "gpt-4o"), slots_directory(tmp_path, "gpt.4o")
    assert a != b and a.parent == b.parent == tmp_path
    held = Slots(a, 1).try_acquire()
    assert held is not None
    assert Slots(a, 1).try_acquire() is None
    other = Slots(b, 1).try_acquire()
    assert other is not None
    held.release()
    other.release()


# -- the meter: a waiting call is not a model call ------------------------------------------------

def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_no_slot_within_the_deadline_is_a_model_error_and_not_a_call(tmp_path):
    slots = Slots(tmp_path / "slots", 1)
    held = slots.try_acquire()
    tracer = Tracer(tmp_path / "trace.jsonl")
    meter = Meter(max_tokens=None, max_steps=None, tracer=tracer, call_deadline=0.5)
    asked = []

    async def request():
        asked.append(1)
        return {"content": "never"}

    started = time.monotonic()
    with pytest.raises(ModelError) as err:
        asyncio.run(meter.call("m", request, lambda r: r, slots=slots))
    assert 0.5 <= time.monotonic() - started < 1.5
    assert "max_connections" in str(err.value) and "model m" in str(err.value)
    assert asked == [] and meter.calls == 0 and meter.model_failure is err.value
    tracer.close()
    events = _events(tmp_path / "trace.jsonl")
    assert [e["type"] for e in events] == ["error"]
    assert events[0]["kind"] == "model"
    held.release()


def test_the_wait_is_not_the_calls_time_but_counts_against_its_deadline(tmp_path):
    slots = Slots(tmp_path / "slots", 1)
    held = slots.try_acquire()
    tracer = Tracer(tmp_path / "trace.jsonl")
    meter = Meter(max_tokens=None, max_steps=None, tracer=tracer, call_deadline=1.0)
    freed = {}

    async def request():
        await asyncio.sleep(0.05)
        return {"content": "hi", "usage": {"prompt_tokens": 3, "completion_tokens": 1}}

    async def main():
        def free():
            freed["at"] = time.time()
            held.release()
        asyncio.get_running_loop().call_later(0.4, free)
        reply = await meter.call("m", request, lambda r: r, slots=slots)
        again = slots.try_acquire()
        assert again is not None  # the call gave its slot back
        again.release()
        return reply

    assert asyncio.run(main())["content"] == "hi"
    tracer.close()
    events = _events(tmp_path / "trace.jsonl")
    assert [e["type"] for e in events] == ["model_call_started", "model_call"]
    assert events[0]["at"] >= freed["at"]  # traced as started only once it had a slot
    assert events[1]["seconds"] < 0.3  # the call's own time, without the 0.4 s wait
    assert meter.calls == 1

    # The deadline covers the wait: 0.7 s waited of a 1 s deadline leaves 0.3 s for a 0.5 s call.
    held = slots.try_acquire()
    meter2 = Meter(max_tokens=None, max_steps=None, call_deadline=1.0)

    async def slow():
        await asyncio.sleep(0.5)
        return {"content": "late"}

    async def main2():
        asyncio.get_running_loop().call_later(0.7, held.release)
        return await meter2.call("m", slow, lambda r: r, slots=slots)

    started = time.monotonic()
    with pytest.raises(ModelError, match="no reply within"):
        asyncio.run(main2())
    assert time.monotonic() - started < 2.0
    assert meter2.calls == 0


# -- the config key and how the slot directory reaches the clients --------------------------------

def _section(**extra) -> dict:
    return {"llm": {"fast": {"model": "m", "base_url": "http://127.0.0.1:9/v1", **extra}}}


def test_max_connections_default_and_validation():
    section = model_section(_section(), "fast")
    assert section.max_connections == DEFAULT_MAX_CONNECTIONS == 8
    assert model_section(_section(max_connections=3), "fast").max_connections == 3
    for bad in (0, -2, "4", 2.5, True):
        with pytest.raises(InputError) as err:
            model_section(_section(max_connections=bad), "fast")
        assert "[llm.fast]" in str(err.value) and "max_connections" in str(err.value), str(err.value)
    # Not a setting that defines results: a resumed run may change it.
    assert "max_connections" not in section.public()
    assert section.public() == model_section(_section(max_connections=2), "fast").public()


def test_the_request_gives_the_model_its_slots(tmp_path):
    from harness.agents.contract import AgentRequest, Limits
    from harness.datasets.model import Instance
    from harness.sandbox.contract import SandboxHandle, SandboxSpec

    section = ModelSection(name="fast", model="m", max_connections=3)
    assert section.slots() is None  # no slot directory: no cap
    handle = SandboxHandle(provider="docker", name="s", host="127.0.0.1", port=1, token="t",
                           spec=SandboxSpec(image="img", run_id="r", instance_id="i"))
    base = dict(instance=Instance(instance_id="i", question="q", root=tmp_path), task="t", agent="plain",
                model=section, limits=Limits(), sandbox=handle, trace_path=str(tmp_path / "t.jsonl"))
    assert AgentRequest(**base).model.slots() is None
    request = AgentRequest(**base, slots_dir=str(tmp_path / "model-slots"))
    assert section.slots() is None  # the caller's section is left as it was
    # What the agent process reads: the JSON, then its section cut to the instance's deadline.
    child = AgentRequest.model_validate_json(request.model_dump_json()).model.within(10)
    slots = child.slots()
    assert slots is not None and slots.count == 3
    assert slots.directory == slots_directory(tmp_path / "model-slots", "fast")
    replay = ModelSection(name="replay", kind="replay", path="x").with_slots(tmp_path)
    assert replay.slots() is None  # replayed calls reach no provider


# -- the real clients over HTTP ---------------------------------------------------------------------

@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")


def _openai_section(server: FakeOpenAI, tmp_path: Path | None = None, **extra) -> ModelSection:
    section = ModelSection(name="fake", model="fake-model-1", base_url=server.base_url, api_key_env=KEY_ENV,
                           **{"max_retries": 2, "timeout": 30, **extra})
    return section.with_slots(tmp_path) if tmp_path else section


def _plain_call(section: ModelSection, meter: Meter):
    from harness.models.chat import OpenAIChat

    async def main():
        chat = OpenAIChat(section, meter)
        try:
            return await chat.complete([{"role": "user", "content": "hi"}], [])
        finally:
            await chat.close()
    return main


def _autogen_call(section: ModelSection, meter: Meter):
    from autogen_core.models import UserMessage

    from harness.agents.autogen.models import build_client

    async def main():
        client = build_client(section.model_copy(update={"model_info": {"function_calling": True}}), meter, None)
        try:
            return await client.create([UserMessage(content="hi", source="user")])
        finally:
            await client.close()
    return main


CLIENTS = {"plain": _plain_call, "autogen": _autogen_call}


def _content(reply) -> str:
    return reply.content


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("retry_after", ["1", "date"])
def test_a_429_is_retried_after_retry_after(key, client, retry_after):
    # An HTTP date has whole seconds: the client must wait until that second, however late (on a loaded
    # machine) the first request went out after the header was written.
    until = float(int(time.time() + 2))
    header = email.utils.formatdate(until, usegmt=True) if retry_after == "date" else retry_after
    with FakeOpenAI([text("<solution>7</solution>")], rate_limited=1, retry_after=header) as server:
        meter = Meter(max_tokens=None, max_steps=None, call_deadline=30)
        reply = asyncio.run(CLIENTS[client](_openai_section(server), meter)())
    assert "<solution>7</solution>" in _content(reply)
    chats = server.chat_requests
    assert [c["status"] for c in chats] == [429, 200]
    gap = chats[1]["at"] - chats[0]["at"]
    if retry_after == "date":
        wall = chats[1]["at"] + (time.time() - time.monotonic())  # the server stamps requests on the monotonic clock
        assert wall >= until - 0.05, (wall, until)  # not the client's 0.5 s backoff
    else:
        assert gap >= 0.95, gap  # the server's Retry-After, not the client's 0.5 s backoff
    assert gap < 3.0, gap
    assert meter.calls == 1


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_429_beyond_the_retries_is_a_model_error_with_the_status(key, client):
    with FakeOpenAI([text("never")], rate_limited=10, retry_after="0.1") as server:
        meter = Meter(max_tokens=None, max_steps=None, call_deadline=30)
        with pytest.raises(ModelError) as err:
            asyncio.run(CLIENTS[client](_openai_section(server, max_retries=1), meter)())
    assert "429" in str(err.value), str(err.value)
    assert str(err.value).startswith("model fake:")
    assert [c["status"] for c in server.chat_requests] == [429, 429]  # one request, max_retries (1) retry
    assert meter.calls == 0 and meter.model_failure is err.value


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("cap", [2, 4])
def test_concurrent_calls_stay_within_the_slots(key, tmp_path, client, cap):
    with FakeOpenAI([], default=text("ok"), delay=0.3) as server:
        section = _openai_section(server, tmp_path, max_connections=cap)

        async def main():
            meters = [Meter(max_tokens=None, max_steps=None, call_deadline=30) for _ in range(6)]
            await asyncio.gather(*(CLIENTS[client](section, m)() for m in meters))

        asyncio.run(main())
    assert len(server.chat_requests) == 6
    assert server.max_in_flight == cap  # at most the cap, and the cap was reached
