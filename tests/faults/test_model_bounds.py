"""Model replies without bounds (issue 18 items 9 and 11): a server that answers 200 and then sends
bytes forever, one that trickles them, and a reply asking for 10,000 tool calls.

The model is the scripted OpenAI-compatible server (tests/fakes/openai_server.py, its `endless`
answers), driven through the real clients: the official OpenAI client of the plain runner, the
LLM judge and the preflight, and AutoGen's OpenAI client; the runs are the real CLI on real
sandboxes. That the client stopped reading is seen from the server: it counts the bytes it
sent before the client hung up (what the kernel's socket buffers held included).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from harness import exit_codes
from tests.fakes.openai_server import FakeOpenAI, endless, text, tool_calls
from tests.helpers.e2e import (
    containers_created_between,
    containers_of,
    explain,
    fake_config,
    harness,
    out_dir,
    remove_leftovers,
    rows,
    trace,
)

CAP_MIB = 1  # HARNESS_MODEL_MAX_REPLY_MIB in these tests
BOUND = 128 * 2**20  # the endless answers' own bound: what an uncapped client reads before failing
SLACK = 32 * 2**20  # socket buffers between the server's writes and the client's reads


def _task(folder: Path, label: str) -> tuple[Path, str]:
    iid = f"{label}-{out_dir(folder).name}"
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": iid, "question": "What is 6*7?", "answer": "42"}) + "\n")
    return data, iid


def _hung_up_early(server: FakeOpenAI) -> dict:
    """The endless answer's record, once the client hung up on it well before the bound."""
    deadline = time.monotonic() + 30
    while not server.endless or not server.endless[-1]["hung_up"]:
        assert time.monotonic() < deadline, f"the client kept reading: {server.endless}"
        time.sleep(0.05)
    record = server.endless[-1]
    assert record["sent"] < CAP_MIB * 2**20 + SLACK, record
    return record


# ------------------------------------------------------------------ every client, in process
@pytest.mark.parametrize("client", ["plain", "autogen", "judge"])
@pytest.mark.parametrize("gzip", [False, True], ids=["identity", "gzip"])
def test_an_endless_reply_is_a_model_error_at_the_cap(monkeypatch, client, gzip):
    """Each real client stops reading at HARNESS_MODEL_MAX_REPLY_MIB and raises a model error that
    names it; a gzip body is counted inflated (1 KiB on the wire inflates to 1 MiB)."""
    from harness.errors import ModelError
    from harness.models.config import ModelSection
    from harness.settings import settings

    monkeypatch.setenv("HARNESS_MODEL_MAX_REPLY_MIB", str(CAP_MIB))
    settings.cache_clear()
    reply = endless(chunk=2**20, most=BOUND // 1024, gzip=True) if gzip else endless(most=BOUND)
    try:
        with FakeOpenAI([reply]) as server:
            section = ModelSection(name="fake", model="fake-model-1", base_url=server.base_url, max_retries=0,
                                   model_info={"function_calling": True})
            t0 = time.monotonic()
            with pytest.raises(ModelError) as caught:
                _call(client, section)
            seconds = time.monotonic() - t0
            _hung_up_early(server)
    finally:
        settings.cache_clear()
    assert f"HARNESS_MODEL_MAX_REPLY_MIB={CAP_MIB}" in str(caught.value), caught.value
    assert seconds < 20, seconds


def _call(client: str, section) -> None:
    from harness.models.meter import Meter

    if client == "judge":
        from harness.models.completion import completer

        completer(section)("Is 42 right?")
        return

    async def once() -> None:
        meter = Meter(max_tokens=None, max_steps=None, call_deadline=60)
        if client == "plain":
            from harness.models.chat import OpenAIChat

            model = OpenAIChat(section, meter)
            try:
                await model.complete([{"role": "user", "content": "hi"}], [])
            finally:
                await model.close()
        else:
            from autogen_core.models import UserMessage

            from harness.agents.autogen.models import build_client

            model = build_client(section, meter, None)
            try:
                await model.create([UserMessage(content="hi", source="user")])
            finally:
                await model.close()

    asyncio.run(once())


# ------------------------------------------------------------------ a real run's instance
@pytest.mark.docker
@pytest.mark.parametrize("agent", ["assistant", "plain"])
def test_an_endless_reply_ends_the_instance_as_a_model_error(tmp_path, image, reliability, agent):
    data, iid = _task(tmp_path / "data", f"endless-{agent}")
    out = out_dir(tmp_path)
    t0 = time.monotonic()
    try:
        with FakeOpenAI([endless(most=BOUND)], default=text("<solution>42</solution>")) as server:
            config = fake_config(tmp_path / "models.toml", server.base_url)
            proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                           "--agent", agent, "--instance-timeout", 120,
                           env={"HARNESS_MODEL_MAX_REPLY_MIB": str(CAP_MIB)}, timeout=240)
            record = _hung_up_early(server)
        (row,) = rows(out)
        reliability.record(f"model answers 200 then bytes forever ({agent} agent)",
                           f"row {row['error_kind']} error; the client hung up after {record['sent'] / 2**20:.1f} "
                           f"MiB sent (cap {CAP_MIB} MiB, socket buffers the rest), exit {proc.returncode}",
                           lost=0 if len(rows(out)) == 1 else 1, leaked=len(containers_of(out)), started=t0)
        assert row["instance_id"] == iid and row["status"] == "error" and row["error_kind"] == "model", row
        assert f"HARNESS_MODEL_MAX_REPLY_MIB={CAP_MIB}" in row["error"], row
        assert proc.returncode == exit_codes.INSTANCE_ERRORS, explain(proc)
        assert "Traceback" not in proc.stderr, explain(proc)
    finally:
        assert remove_leftovers(out) == []


# ------------------------------------------------------------------ the preflight
@pytest.mark.docker
@pytest.mark.parametrize("case", ["cap (assistant agent)", "cap (plain agent)", "cap (judge)", "deadline"])
def test_an_endless_preflight_reply_exits_2_within_the_deadline(tmp_path, reliability, case):
    """A probe answered by endless bytes stops at the cap; one trickled (a few bytes a second, which
    never trips a per-read timeout) stops at HARNESS_PREFLIGHT_TIMEOUT. Both: exit 2, one line naming
    the section and the limit, no container."""
    data, iid = _task(tmp_path / "data", "pre-endless")
    out = out_dir(tmp_path)
    trickle = endless(chunk=64, every=0.5, seconds=150)
    agent_probe = None if case == "cap (judge)" else trickle if case == "deadline" else endless(most=BOUND)
    deadline = 8
    with FakeOpenAI([], probe=agent_probe) as agent, \
            FakeOpenAI([], probe=endless(most=BOUND) if case == "cap (judge)" else None) as judge:
        config = fake_config(tmp_path / "models.toml", agent.base_url)
        config.write_text(config.read_text() + f'\n[llm.judge]\nmodel = "judge-1"\nbase_url = "{judge.base_url}"\n'
                                               'max_retries = 0\n')
        since, t0 = time.time(), time.monotonic()
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", "plain" if "plain" in case else "assistant",
                       "--scorer", "gaia", "--scorer", "llm_judge", "--judge-model", "judge",
                       env={"HARNESS_MODEL_MAX_REPLY_MIB": str(CAP_MIB), "HARNESS_PREFLIGHT_TIMEOUT": str(deadline)},
                       timeout=120)
        seconds = time.monotonic() - t0
        created = containers_created_between(iid, since, time.time())
        if case != "deadline":
            _hung_up_early(judge if case == "cap (judge)" else agent)
    reliability.record(f"model preflight answered by bytes forever: {case}",
                       f"exit {proc.returncode} in {seconds:.1f} s, before any container ("
                       + (f"HARNESS_PREFLIGHT_TIMEOUT={deadline}" if case == "deadline" else f"cap {CAP_MIB} MiB")
                       + ")", leaked=len(created),
                       seconds=seconds)
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, explain(proc)
    section = "--judge-model judge [llm.judge]" if case == "cap (judge)" else "--model fake [llm.fake]"
    assert section in errors[0], errors
    if case == "deadline":
        assert f"did not end within {deadline} s (HARNESS_PREFLIGHT_TIMEOUT)" in errors[0], errors
        assert seconds < deadline + 15, seconds  # the interpreter's start and the dataset's checks around it
    else:
        assert f"HARNESS_MODEL_MAX_REPLY_MIB={CAP_MIB}" in errors[0], errors
    assert created == [] and not (out / "output.jsonl").exists()
    assert agent.chat_requests == [] and judge.chat_requests == []


# ------------------------------------------------------------------ 10,000 tool calls in one reply
@pytest.mark.docker
@pytest.mark.parametrize("agent", ["assistant", "plain"])
def test_a_reply_with_10000_tool_calls_runs_at_most_the_cap(tmp_path, image, reliability, agent):
    cap = 32  # HARNESS_MAX_TOOL_CALLS_PER_REPLY's default, set explicitly
    data, iid = _task(tmp_path / "data", f"calls-{agent}")
    out = out_dir(tmp_path)
    flood = tool_calls(*[("list_files", {"path": "."})] * 10_000)
    t0 = time.monotonic()
    try:
        with FakeOpenAI([flood, text("<solution>42</solution>")]) as server:
            config = fake_config(tmp_path / "models.toml", server.base_url)
            proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                           "--agent", agent, "--instance-timeout", 90,
                           env={"HARNESS_MAX_TOOL_CALLS_PER_REPLY": str(cap)}, timeout=240)
            followup = server.chat_requests[-1]["json"]["messages"]
        (row,) = rows(out)
        events = trace(out, row)
        ran = [e for e in events if e["type"] == "tool_call"]
        dropped = [e for e in events if e["type"] == "tool_calls_dropped"]
        reliability.record(f"one model reply with 10,000 tool calls ({agent} agent)",
                           f"{len(ran)} ran, {dropped[0]['dropped'] if dropped else 0} dropped (traced); "
                           f"row {row['status']}", lost=0, leaked=len(containers_of(out)), started=t0)
        assert proc.returncode == 0, explain(proc)
        assert row["status"] == "ok" and row["correct"] is True, row
        assert len(ran) == cap and len(row["tool_calls"]) == cap, (len(ran), row["tool_calls"][:3])
        assert len(dropped) == 1 and dropped[0]["asked"] == 10_000 and dropped[0]["kept"] == cap, dropped
        assert dropped[0]["dropped"] == 10_000 - cap, dropped
        assert f"HARNESS_MAX_TOOL_CALLS_PER_REPLY={cap}" == dropped[0]["limit"], dropped
        # The model's next request holds only the calls that ran, each with its result.
        assert sum(1 for m in followup if m["role"] == "tool") == cap, followup[-1]
    finally:
        assert remove_leftovers(out) == []
