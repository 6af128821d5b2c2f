"""Every paid call metered when it is made (issue 38 item 2): whoever asks for it, a call is checked against
--max-steps, --max-instance-cost and --max-cost before it is made and counted as it ends (models/meter.py).

The clients are the real ones (the openai SDK, mcp's ClientSession, the tool server's MCP endpoint) against
the fake OpenAI-compatible server (tests/fakes/openai_server.py); no sandbox is needed: a Gaia2 judge's request
reaches the host as a line of the bridge's `out` file, parsed here by the bridge's own reader (`_parsed`) and
handed to the session the harness holds, as agent code that appends lines to that file makes it arrive.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.message import SessionMessage

from harness import exit_codes
from harness.agents.sandboxed.tools import ToolServer
from harness.benchmarks.gaia2.environment import Gaia2Env
from harness.config import RunConfiguration
from harness.environments.mcp_bridge import _parsed
from harness.environments.websearch.env import WebSearch
from harness.environments.websearch.settings import SearchSettings
from harness.errors import InputError, LimitExceeded
from harness.models.budget import BudgetSpec, RunBudget
from harness.models.chat import OpenAIChat
from harness.models.config import ModelSection
from harness.models.meter import Meter
from harness.traces import Tracer
from harness.usage import Price, UsageMissing
from tests.fakes.openai_server import FakeOpenAI, raw, text
from tests.fakes.search_servers import FakeSearch
from tests.helpers.e2e import FAKE_KEY, FAKE_KEY_ENV, REPO, explain, harness, out_dir, rows
from tests.test_media_tools import tone_wav

NO_USAGE = raw(json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model-1",
                           "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                        "message": {"role": "assistant", "content": "OK"}}]}))


def section(base_url: str, name: str = "judge", **extra) -> ModelSection:
    """$0.01 per call of 1000 prompt tokens."""
    return ModelSection(name=name, model="fake-model-1", base_url=base_url, max_retries=0, timeout=20,
                        price_input_per_1k=0.01, price_output_per_1k=0.0, **extra)


def budget(tmp_path: Path, limit: float) -> RunBudget:
    return RunBudget(BudgetSpec(directory=str(tmp_path / "budget"), limit=limit))


def sampling(index: int, kind: str | None) -> bytes:
    """One sampling request as a line of the bridge's `out` (what ARE's driver writes, or agent code)."""
    params = {"messages": [{"role": "user", "content": {"type": "text", "text": f"same meaning? {index}"}}],
              "maxTokens": 64, **({"metadata": {"harness": kind}} if kind else {})}
    return json.dumps({"jsonrpc": "2.0", "id": f"injected-{index}", "method": "sampling/createMessage",
                       "params": params}).encode()


async def injected(env: Gaia2Env, lines: list[bytes]) -> list[dict]:
    """The lines handed to a ClientSession answering sampling with `env.sample`, as the bridge's reader
    hands the server's output; the session's answers to them, in order of arrival."""
    to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    session_writes, from_session = anyio.create_memory_object_stream[SessionMessage](100)
    answers: list[dict] = []
    async with ClientSession(session_reads, session_writes, sampling_callback=env.sample):
        for line in lines:
            await to_session.send(_parsed(line, set()))
        with anyio.fail_after(120):
            while len(answers) < len(lines):
                message = await from_session.receive()
                answers.append(json.loads(message.message.model_dump_json(by_alias=True, exclude_unset=True)))
    return answers


def test_judge_requests_injected_into_the_bridge_stop_at_the_runs_budget(tmp_path):
    """40 judge requests appended to the bridge: before, each reached the judge model ($0.40 against
    --max-cost 0.05) and the spend was known only at the end; now each is admitted by the run's budget before
    it is made, its cost in the run's spend at once: the budget plus at most one call is spent."""
    with FakeOpenAI([], default=text("[[True]]", usage=(1000, 0))) as server:
        run = budget(tmp_path, 0.05)
        meter = Meter(max_tokens=None, max_steps=None, budget=run)
        env = Gaia2Env("scenario.json", None, judge=section(server.base_url), meter=meter)
        answers = asyncio.run(injected(env, [sampling(i, "judge") for i in range(40)]))
        reached = len(server.chat_requests)
    answered = [a for a in answers if "result" in a]
    refused = [a for a in answers if "error" in a]
    assert 5 <= reached <= 6 and len(answered) == reached, (reached, answers[:3])
    assert len(refused) == 40 - reached and all("max_cost" in a["error"]["message"] for a in refused)
    assert run.spent() == pytest.approx(0.01 * reached) and run.spent() <= 0.05 + 0.01 + 1e-9
    assert meter.judged.cost == pytest.approx(run.spent()) and meter.totals.cost == 0  # the judge's, not the agent's
    assert env.judge_usage.llm_calls == reached


def test_judge_requests_count_toward_the_instance_cost(tmp_path):
    """--max-instance-cost bounds an instance's judge calls too, asked by whoever."""
    with FakeOpenAI([], default=text("[[True]]", usage=(1000, 0))) as server:
        meter = Meter(max_tokens=None, max_steps=None, max_cost=0.03)
        env = Gaia2Env("scenario.json", None, judge=section(server.base_url), meter=meter)
        answers = asyncio.run(injected(env, [sampling(i, "judge") for i in range(10)]))
        reached = len(server.chat_requests)
    assert reached == 3 and meter.judged.cost == pytest.approx(0.03)
    assert all("max_instance_cost" in a["error"]["message"] for a in answers if "error" in a)


def test_a_request_of_a_kind_the_phase_does_not_have_is_refused(tmp_path):
    """App agents' requests ({"harness": "a2a"}) in a standard-phase run, and requests of no kind, were answered
    (with the agent's model and the judge's); now only the kinds the run has are: nothing reaches a model."""
    with FakeOpenAI([], default=text("sure", usage=(10, 5))) as server:
        meter = Meter(max_tokens=None, max_steps=1)
        agent = section(server.base_url, name="agent")
        env = Gaia2Env("scenario.json", None, judge=section(server.base_url), agent=agent, meter=meter)
        lines = [sampling(i, "a2a") for i in range(5)] + [sampling(5, None), sampling(6, "other")]
        answers = asyncio.run(injected(env, lines))
        reached = len(server.chat_requests)
    assert reached == 0 and meter.calls == 0 and meter.judged.llm_calls == 0
    assert all("not one this run's phase has" in a["error"]["message"] for a in answers), answers


def test_app_agent_requests_keep_to_max_steps_in_an_agent2agent_run(tmp_path):
    """ARE's app agents' calls asked at once (or injected): the calls in flight are steps already."""
    with FakeOpenAI([], default=text("done", usage=(10, 5))) as server:
        meter = Meter(max_tokens=None, max_steps=2)
        env = Gaia2Env("scenario.json", None, a2a=True, agent=section(server.base_url, name="agent"), meter=meter)
        answers = asyncio.run(injected(env, [sampling(i, "a2a") for i in range(6)]))
        reached = len(server.chat_requests)
    assert reached == 2 and meter.calls == 2  # before, all 6: asked at once, each passed the check of calls ended
    assert sorted("result" in a for a in answers) == [False] * 4 + [True] * 2
    assert all("max_steps" in a["error"]["message"] for a in answers if "error" in a)


async def _own_calls(server: ToolServer, n: int) -> list[dict]:
    await server.start()
    try:
        headers = {"Content-Type": "application/json", "Authorization": "Bearer tok",
                   "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
        answers = []
        for i in range(n):
            body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "_add",
                                                                               "arguments": {"a": i, "b": 1}}}
            answer = await server.answer({"method": "POST", "path": "/mcp", "body": json.dumps(body).encode(),
                                          "headers": headers})
            answers.append(json.loads(answer["body"])["result"])
        return answers
    finally:
        await server.close()


async def _add(a: int, b: int) -> str:
    """Add two whole numbers."""
    return str(a + b)


def test_a_programs_own_tool_calls_over_mcp_are_steps(tmp_path):
    """30 tool calls through $HARNESS_MCP_URL under --max-steps 1, with no model call: before, all ran; now each
    call no model reply asked for is a step, and past the limit it is refused and the instance ends (max_steps),
    as the plain runner's tool calls end with its model calls."""
    meter = Meter(max_tokens=None, max_steps=1)
    server = ToolServer([_add], "tok", Tracer(tmp_path / "trace.jsonl"), [], meter)
    results = asyncio.run(_own_calls(server, 30))
    ran = [r for r in results if not r["isError"]]
    assert len(ran) == 1 and ran[0]["content"][0]["text"] == "1"
    assert all("max_steps" in r["content"][0]["text"] or "has ended" in r["content"][0]["text"]
               for r in results[1:])
    assert isinstance(server.stopped, LimitExceeded) and server.stopped.limit == "max_steps"
    assert meter.tool_steps == 1 and meter.exceeded == "max_steps"


def test_a_reply_without_usage_after_the_preflight_is_never_free(tmp_path):
    """A server that drops `usage` after the preflight: before, 12 calls cost $0 under --max-cost 0.03, in
    silence; now such a reply stops the run (UsageMissing: an input error naming the section, exit 2 in a run),
    or costs the section's declared price_per_call_without_usage, which the budget then counts."""
    async def calls(chat: OpenAIChat, n: int) -> None:
        try:
            for _ in range(n):
                await chat.complete([{"role": "user", "content": "2+2?"}], [])
        finally:
            await chat.close()

    with FakeOpenAI([], default=NO_USAGE) as server:
        meter = Meter(max_tokens=None, max_steps=None, price=Price.of(section(server.base_url, name="fake")),
                      budget=budget(tmp_path / "a", 0.03))
        with pytest.raises(UsageMissing, match=r"model fake \[llm.fake\]: a reply without token usage"):
            asyncio.run(calls(OpenAIChat(section(server.base_url, name="fake"), meter), 12))
        stopped_after = len(server.chat_requests)

        declared = section(server.base_url, name="fake", price_per_call_without_usage=0.01)
        run = budget(tmp_path / "b", 0.03)
        priced = Meter(max_tokens=None, max_steps=None, price=Price.of(declared), budget=run)
        with pytest.raises(LimitExceeded, match="max_cost"):
            asyncio.run(calls(OpenAIChat(declared, priced), 12))
        budgeted = len(server.chat_requests) - stopped_after
    assert stopped_after == 1 and meter.refused is not None
    assert budgeted == 3 and priced.totals.cost == pytest.approx(0.03) and run.spent() == pytest.approx(0.03)


def test_a_section_priced_at_zero_may_omit_usage(tmp_path):
    with FakeOpenAI([], default=NO_USAGE) as server:
        free = ModelSection(name="local", model="fake-model-1", base_url=server.base_url, max_retries=0,
                            price_input_per_1k=0.0, price_output_per_1k=0.0)
        meter = Meter(max_tokens=None, max_steps=None, price=Price.of(free))
        chat = OpenAIChat(free, meter)

        async def one() -> None:
            await chat.complete([{"role": "user", "content": "hi"}], [])
            await chat.close()

        asyncio.run(one())
    assert meter.calls == 1 and meter.totals.cost == 0 and meter.refused is None


def test_paid_searches_are_priced_and_stop_at_the_runs_budget(tmp_path, monkeypatch):
    """A keyed provider's searches cost [search.PROVIDER] price_per_search, checked by the meter before each is sent;
    a cached one costs nothing."""
    monkeypatch.setenv("TEST_SEARCH_KEY", "test-key")
    with FakeSearch("tavily") as server:
        settings = SearchSettings(provider="tavily", base_url=server.base_url, api_key_env="TEST_SEARCH_KEY",
                                  price_per_search=0.01, cache_dir=str(tmp_path / "cache"))
        search = WebSearch(settings, Tracer(tmp_path / "trace.jsonl"))
        run = budget(tmp_path, 0.03)
        search.meter = meter = Meter(max_tokens=None, max_steps=None, budget=run)
        search.search("teak bench")
        search.search("teak bench")  # the run's cache: no call, no cost
        with pytest.raises(LimitExceeded, match="max_cost"):
            for i in range(30):
                search.search(f"teak bench {i}")
        sent = len(server.requests)
    assert sent == 3 and meter.totals.cost == pytest.approx(0.03) and run.spent() == pytest.approx(0.03)


@pytest.mark.parametrize(("extra", "search", "named"), [
    ('transcription_model = "whisper-1"\n', None, "offers transcribe_audio (whisper-1) with no transcription_"
                                                  "price_per_call: set transcription_price_per_call in [llm.fake]"),
    ("", "tavily", "--search tavily has no price_per_search in [search.tavily]")])
def test_a_budget_needs_the_price_of_every_paid_call(extra, search, named, tmp_path, monkeypatch):
    """--max-cost with an unpriced transcription model or search provider: exit 2 naming the key, before any
    container (with the prices, the configuration is taken)."""
    monkeypatch.setenv("TEST_SEARCH_KEY", "test-key")
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": "a", "question": "6*7?", "answer": "42"}) + "\n")
    config = tmp_path / "models.toml"
    base = ('[llm.fake]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nprice_input_per_1k = 0.01\n'
            'price_output_per_1k = 0.01\n' + extra + '[search.tavily]\napi_key_env = "TEST_SEARCH_KEY"\n')
    flags = {"dataset": data, "model": "fake", "config": config, "search": search,
             "output": {"dir": tmp_path / "o"}, "execution": {"max_cost": 1.0}}
    config.write_text(base)
    with pytest.raises(InputError, match=re.escape(named)):
        RunConfiguration.from_flags(**flags)
    config.write_text(base.replace(extra, extra + "transcription_price_per_call = 0.006\n") if extra
                      else base + "price_per_search = 0.008\n")
    assert RunConfiguration.from_flags(**flags).execution.max_cost == 1.0


# ------------------------------------------------------------------ end to end, in real sandboxes
LOOP = Path(__file__).resolve().parent / "data" / "paid" / "transcribe_loop.py"


def _model_config(path: Path, base_url: str, extra: str) -> Path:
    path.write_text(f'[llm.fake]\nmodel = "fake-model-1"\nbase_url = "{base_url}"\napi_key_env = "{FAKE_KEY_ENV}"\n'
                    f'max_retries = 0\ntimeout = 30\nprice_input_per_1k = 0.01\nprice_output_per_1k = 0.03\n{extra}')
    return path


@pytest.mark.docker
def test_paid_transcriptions_through_the_mcp_relay_are_priced_and_keep_to_max_steps(tmp_path, image):
    """30 transcribe_audio calls by an in-sandbox program through $HARNESS_MCP_URL under --max-steps 1 --max-cost
    0.01: before, all 30 reached the speech-to-text server and the row said $0; now the first is a step and costs
    transcription_price_per_call, the second is refused and the instance ends as a max_steps limit."""
    (tmp_path / "tone.wav").write_bytes(tone_wav())
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": "audio-loop", "question": "What is said in tone.wav?",
                                "answer": "fox", "files": ["tone.wav"]}) + "\n")
    out = out_dir(tmp_path)
    with FakeOpenAI([], transcript="a quick brown fox") as server:
        config = _model_config(tmp_path / "m.toml", server.base_url,
                               'transcription_model = "whisper-1"\ntranscription_price_per_call = 0.006\n')
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", f"sandbox:python3 @{LOOP.relative_to(REPO)} 30", "--workers", 1,
                       "--instance-timeout", 180, "--max-retries", 0, "--max-steps", 1, "--max-cost", 0.01,
                       env={FAKE_KEY_ENV: FAKE_KEY})
        sent = len(server.transcriptions)
    (row,) = rows(out)
    assert sent == 1, (sent, explain(proc))
    assert row["status"] == "limit" and row["limit"] == "max_steps", row
    assert row["usage"]["cost"] == pytest.approx(0.006) and row["usage"]["llm_calls"] == 0
    assert proc.returncode == 0, explain(proc)


@pytest.mark.docker
def test_a_server_that_drops_usage_after_the_preflight_stops_the_run_with_exit_2(tmp_path, image):
    """The preflight's reply carries `usage`, the run's replies none: before, 12 calls at $0 under --max-cost 0.03,
    in silence; now the first such reply stops the run, exit 2 naming the section, and no more instances start."""
    data = tmp_path / "tasks.jsonl"
    data.write_text("".join(json.dumps({"instance_id": f"nousage-{i}", "question": "What is 6*7?", "answer": "42"})
                            + "\n" for i in range(3)))
    out = out_dir(tmp_path)
    with FakeOpenAI([], default=NO_USAGE) as server:  # the probe: text "OK" with usage
        config = _model_config(tmp_path / "m.toml", server.base_url, "")
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", "plain", "--workers", 1, "--max-retries", 0, "--max-cost", 0.03,
                       env={FAKE_KEY_ENV: FAKE_KEY})
        asked = len(server.chat_requests)
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    assert asked == 1  # one call of the run (the preflight's are probes)
    (row,) = rows(out)
    assert row["status"] == "error" and row["error_kind"] == "input" and "[llm.fake]" in row["error"], row
    assert "model fake [llm.fake]: a reply without token usage" in proc.stderr and "Traceback" not in proc.stderr
    assert "2 instance(s) not started" in proc.stderr, proc.stderr


def test_a_judge_reply_without_usage_is_kept_for_the_run_to_stop(tmp_path):
    """ARE's judge is answered with an error, and the instance's meter keeps the refusal: the agent's process
    raises it once the instance ends (runner/agent_process/child.py), an input error that stops the run."""
    with FakeOpenAI([], default=NO_USAGE) as server:
        meter = Meter(max_tokens=None, max_steps=None)
        env = Gaia2Env("scenario.json", None, judge=section(server.base_url), meter=meter)
        (answer,) = asyncio.run(injected(env, [sampling(0, "judge")]))
    assert "a reply without token usage" in answer["error"]["message"]
    assert isinstance(meter.refused, UsageMissing) and "[llm.judge]" in str(meter.refused)


@pytest.mark.docker
def test_judge_requests_a_gaia2_agent_writes_into_the_bridge_keep_to_the_runs_budget(tmp_path, image):
    """The adversarial case end to end: an in-sandbox program appends 40 judge requests to every Gaia2 bridge it
    can write under --judge-model and --max-cost 0.05 ($0.01 a judge call). Before, it could write the driver's
    bridge and every one reached the judge model ($0.40), counted only at the end. Now the driver runs in a judge's
    sandbox the program cannot reach (item 1), and whatever reaches the session is admitted by the run's budget
    before it is made (test_judge_requests_injected_into_the_bridge_stop_at_the_runs_budget, at the session): the
    judge model is asked at most the budget's worth and one call more, ARE's own calls included."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "proto_find_image_file.json").write_text((REPO / "datasets" / "gaia2-smoke" /
                                                      "proto_find_image_file.json").read_text())
    out = out_dir(tmp_path)
    script = REPO / "tests" / "data" / "paid" / "inject_judge.py"
    with FakeOpenAI([], default=text("Evaluation: [[True]]", usage=(1000, 0))) as server:
        config = _model_config(tmp_path / "m.toml", server.base_url, "")
        config.write_text(config.read_text() + config.read_text().replace("[llm.fake]", "[llm.judge]"))
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--judge-model", "judge",
                       "--scorer", "gaia2", "--agent", f"sandbox:python3 @{script.relative_to(REPO)} 40",
                       "--output-dir", out, "--epochs", 1, "--max-retries", 0, "--instance-timeout", 300,
                       "--max-cost", 0.05, env={FAKE_KEY_ENV: FAKE_KEY})
        asked = len(server.chat_requests)
    (row,) = rows(out)
    assert row["answer"] in ("injected 0", "injected 40"), row
    assert asked <= 6, (asked, explain(proc))
    if asked:  # ARE's judge asked nothing of a scenario where the agent did nothing: no spend to read
        spend = json.loads((out / ".harness-tmp" / "budget" / "spend.json").read_text())
        assert spend["spent"] == pytest.approx(0.01 * asked)
