"""Pacing (harness/models/pacing.py): a 429/503's Retry-After waited for within the call's deadline, or
the call failing at once saying what was asked; the adaptive cap on calls in flight (models/slots.py).

The real clients (the plain runner's chat models and AutoGen's, through the Meter) against the fake
servers of each wire format (tests/fakes/openai_server.py, tests/fakes/providers.py) over HTTP.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import multiprocessing
import re
import time

import pytest

from harness.agents.autogen.models import build_client
from harness.models.config import parse_section
from harness.models.factory import chat_model
from harness.models.meter import Meter
from harness.models.pacing import Unpaced, ask_of
from harness.models.slots import Slots, slots_directory
from harness.traces import Tracer, read_events
from tests.fakes.openai_server import FakeOpenAI, error, text
from tests.fakes.providers import FakeAnthropic, FakeAzure, FakeGemini, anthropic_error

KEYS = {"FAKE_PACING_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-fake", "AZURE_OPENAI_API_KEY": "azure-fake-key",
        "GEMINI_API_KEY": "gemini-fake-key"}
SERVERS = {"openai": FakeOpenAI, "anthropic": FakeAnthropic, "azure": FakeAzure, "gemini": FakeGemini}
CTX = multiprocessing.get_context("fork")


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


def busy(provider: str, status: int, headers: dict) -> tuple:
    """A 429/503 answer in the provider's shape."""
    if provider == "anthropic":
        return anthropic_error(status, "rate_limit_error" if status == 429 else "api_error", headers=headers)
    return error(status, headers=headers)


def section(server, provider: str, tmp_path=None, **extra):
    raw = {"provider": provider, "model": server.model, "max_retries": 3, "timeout": 20, **extra}
    if provider == "azure":
        raw.update(azure_endpoint=server.base_url, api_version="2024-10-21", deployment=server.deployment)
    else:
        raw["base_url"] = server.base_url
    if provider == "openai":
        raw["api_key_env"] = "FAKE_PACING_KEY"
    made = parse_section({"llm": {"m": raw}}, "m")
    return made.with_slots(tmp_path) if tmp_path is not None else made


async def one_call(runner: str, made, meter: Meter) -> str:
    """One metered call through the runner's client; the reply's text."""
    if runner == "plain":
        chat = chat_model(made, meter, None)
        try:
            return (await chat.complete([{"role": "user", "content": "hi"}], [])).content
        finally:
            await chat.close()
    from autogen_core.models import UserMessage

    client = build_client(made.model_copy(update={"model_info": {"function_calling": True}}), meter, None)
    try:
        return str((await client.create([UserMessage(content="hi", source="user")])).content)
    finally:
        await client.close()


def waits(path) -> list[dict]:
    return [e for e in read_events(path) if e["type"] == "model_wait"]


# -- what an answer asks for -------------------------------------------------------------------------

def test_the_three_forms_of_the_ask():
    assert ask_of(429, {"retry-after": "70"}).seconds == 70.0
    assert ask_of(429, {"retry-after-ms": "1500", "retry-after": "9"}).seconds == 1.5  # the finer one wins
    soon = ask_of(503, {"retry-after": email.utils.formatdate(time.time() + 30, usegmt=True)})
    assert 28 <= soon.seconds <= 30 and soon.said.startswith("Retry-After: ")
    assert ask_of(429, {"retry-after": email.utils.formatdate(time.time() - 30, usegmt=True)}).seconds == 0.0
    none = ask_of(429, {})
    assert none.seconds is None and none.said == "" and 0.375 <= none.wait(0) <= 0.5 and none.wait(10) <= 8.0
    assert ask_of(429, {"retry-after": "soon"}).seconds is None  # unreadable: the backoff


# -- waited for, or failing at once ------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("runner", ["plain", "autogen"])
def test_a_retry_after_of_70_seconds_is_waited_for(runner, tmp_path):
    with FakeOpenAI([busy("openai", 429, {"retry-after": "70"}), text("<solution>7</solution>")]) as server:
        meter = Meter(max_tokens=None, max_steps=None, call_deadline=150, tracer=Tracer(tmp_path / "t.jsonl"))
        reply = asyncio.run(one_call(runner, section(server, "openai"), meter))
    assert "<solution>7</solution>" in reply
    chats = server.chat_requests
    assert [c["status"] for c in chats] == [429, 200]  # the SDK's own 60 s cap would have retried sooner
    assert 69.5 <= chats[1]["at"] - chats[0]["at"] < 80
    assert meter.calls == 1 and meter.model_failure is None
    assert [(w["status"], w["asked"], w["seconds"], w["retry"]) for w in waits(tmp_path / "t.jsonl")] == [
        (429, "Retry-After: 70", 70.0, 1)]


@pytest.mark.parametrize("runner", ["plain", "autogen"])
@pytest.mark.parametrize("provider", sorted(SERVERS))
def test_a_wait_beyond_the_deadline_fails_at_once_saying_what_was_asked(runner, provider):
    fake = SERVERS[provider]
    with fake([busy(provider, 429, {"retry-after": "70"}), text("never")]) as server:
        meter = Meter(max_tokens=None, max_steps=None, call_deadline=20)
        begun = time.monotonic()
        with pytest.raises(Unpaced) as err:
            asyncio.run(one_call(runner, section(server, provider), meter))
        took = time.monotonic() - begun
    message = str(err.value)
    assert message.startswith("model m: the provider answered HTTP 429 (asked to wait Retry-After: 70)"), message
    left = re.search(r"a wait of 70 s, more than the (\d+) s left of the call's 20 s deadline", message)
    assert left and 20 - took <= int(left.group(1)) + 1 <= 21, (message, took)  # what was left when the 429 came
    assert took < 10, took  # not waited: neither the 70 s nor the deadline's 20 s
    assert [c["status"] for c in server.chat_requests] == [429]  # the SDK did not retry it either
    assert meter.model_failure is err.value and meter.calls == 0


@pytest.mark.parametrize("runner", ["plain", "autogen"])
@pytest.mark.parametrize("form", ["retry-after-ms", "date", "503"])
def test_short_waits_of_each_form_are_waited_as_asked(runner, form, tmp_path):
    status, headers = 429, {"retry-after-ms": "1500"}
    if form == "date":  # a moment in whole seconds, 4 to 5 s from now: what is left of it when the 429 comes
        headers = {"retry-after": email.utils.formatdate(time.time() + 5, usegmt=True)}
    if form == "503":
        status, headers = 503, {"retry-after": "1"}
    with FakeOpenAI([busy("openai", status, headers), text("ok")]) as server:
        meter = Meter(max_tokens=None, max_steps=None, call_deadline=30, tracer=Tracer(tmp_path / "t.jsonl"))
        assert asyncio.run(one_call(runner, section(server, "openai"), meter)) == "ok"
    chats = server.chat_requests
    assert [c["status"] for c in chats] == [status, 200]
    (wait,) = waits(tmp_path / "t.jsonl")
    assert wait["status"] == status
    if form == "date":
        assert 0.5 < wait["seconds"] <= 5.0, wait
    else:
        assert wait["seconds"] == {"retry-after-ms": 1.5, "503": 1.0}[form]
    assert wait["seconds"] - 0.05 <= chats[1]["at"] - chats[0]["at"] < wait["seconds"] + 2.5  # waited as asked


@pytest.mark.parametrize("provider", ["anthropic", "azure"])
def test_other_providers_wait_as_asked_too(provider):
    with SERVERS[provider]([busy(provider, 429, {"retry-after": "1"}), text("ok")]) as server:
        meter = Meter(max_tokens=None, max_steps=None, call_deadline=30)
        assert asyncio.run(one_call("plain", section(server, provider), meter)) == "ok"
    chats = server.chat_requests
    assert [c["status"] for c in chats] == [429, 200]
    assert 0.95 <= chats[1]["at"] - chats[0]["at"] < 3.5


# -- the adaptive cap -----------------------------------------------------------------------------------

def test_a_429_halves_the_cap_once_per_burst_and_successes_raise_it_back(tmp_path):
    slots, other = Slots(tmp_path, 8), Slots(tmp_path, 8)  # two processes' views of one model's slots
    sent = time.time()
    slots.throttled(sent)
    assert other.cap() == 4
    other.throttled(sent)  # the same burst: sent before the cut
    assert slots.cap() == 4
    slots.throttled(time.time())
    assert other.cap() == 2
    held = [slots.try_acquire(), slots.try_acquire()]
    assert all(held) and slots.try_acquire() is None  # only the slots below the cap are taken
    assert sorted(s.index for s in held) == [0, 1]
    for slot in held:
        slot.release()
    for _ in range(2):
        other.succeeded()
    assert slots.cap() == 3  # after as many successes as the cap
    for _ in range(3 + 4 + 5 + 6 + 7):
        slots.succeeded()
    assert other.cap() == 8
    slots.succeeded()
    assert other.cap() == 8  # never above max_connections
    assert json.loads((tmp_path / "cap.json").read_text())["cap"] == 8


def _cut(directory: str, go) -> None:
    go.wait(30)
    Slots(directory, 8).throttled(time.time())


def test_cuts_from_many_processes_are_counted_under_one_lock(tmp_path):
    go = CTX.Event()
    procs = [CTX.Process(target=_cut, args=(str(tmp_path), go)) for _ in range(6)]
    for proc in procs:
        proc.start()
    go.set()
    for proc in procs:
        proc.join(60)
    assert [p.exitcode for p in procs] == [0] * 6
    # Each sent after the cuts before it, or in the same burst: 8 -> at least 4, never below 1.
    assert 1 <= Slots(tmp_path, 8).cap() <= 4


@pytest.mark.parametrize("runner", ["plain", "autogen"])
def test_429s_lower_the_cap_in_flight_and_successes_raise_it(runner, tmp_path):
    slots = Slots(slots_directory(tmp_path, "m"), 8)  # what the calls of section "m" hold
    assert slots.cap() == 8

    async def calls(n: int) -> None:
        await asyncio.gather(*(one_call(runner, made, Meter(max_tokens=None, max_steps=None, call_deadline=30))
                               for _ in range(n)))

    # Eight calls at once, each answered 429 first: one burst, one cut (8 -> 4).
    with FakeOpenAI([], default=text("ok"), rate_limited=8, retry_after="0.3", delay=0.2) as server:
        made = section(server, "openai", tmp_path, max_connections=8)
        asyncio.run(calls(8))
    assert [c["status"] for c in server.chat_requests].count(429) == 8
    # Cut to 4 by the burst (to 2 if a client sent its first request only after that cut), then raised
    # by one after as many successes as the cap (the eight retries).
    assert 3 <= slots.cap() <= 5
    cap = slots.cap()
    # Then six at once: no more than the cap in force are in flight.
    with FakeOpenAI([], default=text("ok"), delay=0.3) as server:
        made = section(server, "openai", tmp_path, max_connections=8)
        asyncio.run(calls(6))
    assert server.max_in_flight == cap
    assert slots.cap() > cap  # raised back after successes


def test_the_progress_line_shows_a_lowered_cap(tmp_path):
    import io
    import types

    from rich.console import Console

    from harness.models.config import ModelSection
    from harness.results.layout import RunDir
    from harness.runner.evaluate import _Lines, model_caps

    model = ModelSection(name="fake", model="m", max_connections=8)
    caps = model_caps(types.SimpleNamespace(model=model, output_dir=tmp_path))  # type: ignore[arg-type]
    assert caps() == ""  # at the full cap: nothing said
    Slots(slots_directory(RunDir(tmp_path).scratch / "model-slots", "fake"), 8).throttled(time.time())
    assert caps() == ", fake cap 4/8 after 429s"
    out = io.StringIO()
    with _Lines(Console(file=out, width=300), "instances", 2, caps) as lines:
        lines.update(1, 1, 0, 1, 0.5)
    assert "progress: 1/2 instances (50%), pass 1 (100% of done), errors 0, cost $0.5000 (projected $1.0000), " \
           "fake cap 4/8 after 429s, elapsed " in out.getvalue(), out.getvalue()
    replay = ModelSection(name="replay", kind="replay", path="x")
    assert model_caps(types.SimpleNamespace(model=replay, output_dir=tmp_path))() == ""  # type: ignore[arg-type]


class HeldClock:
    """A simulated clock (models/meter.py Clock) that notes when it was held and by how much it was moved on."""

    def __init__(self):
        self.notes: list[tuple] = []

    async def pause(self) -> None:
        self.notes.append(("pause", time.monotonic()))

    async def resume(self, seconds: float) -> None:
        self.notes.append(("resume", time.monotonic(), seconds))


@pytest.mark.parametrize("runner", ["plain", "autogen"])
def test_a_simulated_clock_stands_still_during_a_call_and_moves_by_its_generation_alone(runner):
    """Gaia2's clock, as ARE's agents hold it: paused before the request goes out, resumed once the reply is
    read, moved on by the seconds the successful request took (0.4 s here), not the 429's 1.5 s wait."""
    clock = HeldClock()
    with FakeOpenAI([busy("openai", 429, {"retry-after-ms": "1500"}), text("ok")], delay=0.4) as server:
        meter = Meter(max_tokens=None, max_steps=None, call_deadline=30)
        meter.clocks = [clock]
        assert asyncio.run(one_call(runner, section(server, "openai"), meter)) == "ok"
    (paused, held), (resumed, back, moved) = clock.notes
    assert (paused, resumed) == ("pause", "resume")
    first, second = server.chat_requests
    assert held <= first["at"] and second["at"] < back  # held before the first request, until the reply
    assert 0.4 <= moved < 1.4, clock.notes  # the successful request's seconds, without the wait before it
    assert back - held >= 1.5 + 0.8  # while the whole call took the wait and both requests

    failing = HeldClock()  # a call that fails moves the clock by all its seconds, and never leaves it held
    with FakeOpenAI([error(400)]) as server:
        meter = Meter(max_tokens=None, max_steps=None, call_deadline=30)
        meter.clocks = [failing]
        with pytest.raises(Exception):  # noqa: B017 - the model's error, whatever its type; the clock is the point
            asyncio.run(one_call(runner, section(server, "openai"), meter))
    assert [note[0] for note in failing.notes] == ["pause", "resume"]
