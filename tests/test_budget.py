"""Every token priced, the judge metered, and budgets that hold (issue 21 items 1 and 2).

Usage classes against the fake OpenAI server (cached and reasoning details) through the plain
runner's client and AutoGen's, an AutoGen replay of a recording with classes, old rows; the run's
spend shared across processes (models/budget.py); preflight refusals without prices; a real run
stopped by --max-cost with two workers; the judge's cost in a run and in a rescore."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal

import pytest

from harness.errors import InputError, LimitExceeded
from harness.models.budget import BudgetSpec, RunBudget
from harness.models.config import parse_section
from harness.models.meter import Meter
from harness.results.model import ResultRow
from harness.usage import Price, counts
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import FAKE_KEY, FAKE_KEY_ENV, dataset_42, explain, fake_config, harness, out_dir, rows

PRICE = Price(input=2.0, output=8.0, cached_input=0.5)


def test_counts_read_each_providers_classes():
    openai = {"prompt_tokens": 1000, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 600},
              "completion_tokens_details": {"reasoning_tokens": 200}}
    assert counts(openai) == {"prompt_tokens": 1000, "completion_tokens": 300, "cached_prompt_tokens": 600,
                              "reasoning_tokens": 200}
    anthropic = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 700,
                 "cache_creation_input_tokens": 50}
    assert counts(anthropic) == {"prompt_tokens": 850, "completion_tokens": 20, "cached_prompt_tokens": 700,
                                 "cache_write_tokens": 50}
    assert counts({"prompt_tokens": 5, "completion_tokens": 1}) == {"prompt_tokens": 5, "completion_tokens": 1}
    assert counts(counts(openai)) == counts(openai)  # the harness's own form reads as it is (a replay turn)
    assert counts(None) == {"prompt_tokens": 0, "completion_tokens": 0}


def test_each_class_at_its_price():
    usage = {"prompt_tokens": 1000, "completion_tokens": 300, "cached_prompt_tokens": 600, "reasoning_tokens": 200}
    # 400 fresh at 2.0, 600 cached at 0.5, 300 output (reasoning within) at 8.0, per 1000
    assert PRICE.cost(usage) == pytest.approx((400 * 2.0 + 600 * 0.5 + 300 * 8.0) / 1000)
    assert Price(input=2.0, output=8.0).cost(usage) == pytest.approx((1000 * 2.0 + 300 * 8.0) / 1000)  # default
    written = {"prompt_tokens": 100, "completion_tokens": 0, "cache_write_tokens": 100}
    assert Price(input=1.0, cache_write=1.25).cost(written) == pytest.approx(0.125)
    section = parse_section({"llm": {"m": {"model": "x", "price_input_per_1k": 2.0, "price_output_per_1k": 8.0,
                                           "price_cached_input_per_1k": 0.5}}}, "m")
    assert Price.of(section) == PRICE and section.priced()
    assert not parse_section({"llm": {"m": {"model": "x", "price_input_per_1k": 2.0}}}, "m").priced()


def test_old_rows_load_with_zero_classes():
    old = {"instance_id": "a", "status": "ok", "usage": {"prompt_tokens": 5, "completion_tokens": 2, "llm_calls": 1,
                                                         "cost": 0.1}}
    row = ResultRow.model_validate_json(json.dumps(old))
    assert row.usage.cached_prompt_tokens == row.usage.reasoning_tokens == 0 and row.usage.cost == 0.1
    assert row.judge_usage.cost == 0.0 and row.judge_usage.llm_calls == 0


DETAILED = (1000, 300, 600, 200)  # prompt, completion, cached, reasoning


@pytest.fixture
def fake_key(monkeypatch):
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)


def _section(server):
    return parse_section({"llm": {"m": {"model": "fake-model-1", "base_url": server.base_url,
                                        "api_key_env": FAKE_KEY_ENV, "max_retries": 0,
                                        "model_info": {"function_calling": True}}}}, "m")


def test_plain_runner_counts_cached_and_reasoning_tokens(fake_key):
    from harness.models.factory import chat_model

    with FakeOpenAI([text("<solution>1</solution>", usage=DETAILED)]) as server:
        meter = Meter(max_tokens=None, max_steps=None, price=PRICE)

        async def go():
            chat = chat_model(_section(server), meter, None)
            reply = await chat.complete([{"role": "user", "content": "q"}], [])
            await chat.close()
            return reply

        reply = asyncio.run(go())
    assert reply.usage == counts(dict(zip(("prompt_tokens", "completion_tokens"), DETAILED[:2], strict=True),
                                      prompt_tokens_details={"cached_tokens": 600},
                                      completion_tokens_details={"reasoning_tokens": 200}))
    usage = meter.usage()
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens,
            usage.reasoning_tokens) == DETAILED
    assert usage.cost == pytest.approx((400 * 2.0 + 600 * 0.5 + 300 * 8.0) / 1000)


def test_autogen_client_counts_the_classes_its_usage_drops(fake_key):
    from autogen_core.models import UserMessage

    from harness.agents.autogen.models import build_client

    with FakeOpenAI([text("<solution>1</solution>", usage=DETAILED)]) as server:
        meter = Meter(max_tokens=None, max_steps=None, price=PRICE)

        async def go():
            client = build_client(_section(server), meter, None)
            result = await client.create([UserMessage(content="q", source="user")])
            await client.close()
            return result

        result = asyncio.run(go())
    assert result.usage.prompt_tokens == 1000  # AutoGen's own: two classes
    usage = meter.usage()
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens,
            usage.reasoning_tokens) == DETAILED
    assert usage.cost == pytest.approx((400 * 2.0 + 600 * 0.5 + 300 * 8.0) / 1000)


def test_autogen_replay_of_a_recording_with_classes():
    from autogen_core.models import UserMessage

    from harness.agents.autogen.models import build_client

    recorded = {"prompt_tokens": 100, "completion_tokens": 10, "cached_prompt_tokens": 80, "reasoning_tokens": 4}
    section = parse_section({"llm": {"r": {"kind": "replay"}}}, "r")
    meter = Meter(max_tokens=None, max_steps=None, price=PRICE)

    async def go():
        client = build_client(section, meter, [{"content": "<solution>1</solution>", "usage": recorded}])
        return await client.create([UserMessage(content="q", source="user")])

    result = asyncio.run(go())  # the extra keys do not reach AutoGen's RequestUsage
    assert result.usage.prompt_tokens == 100 and meter.usage().cached_prompt_tokens == 80
    assert meter.usage().reasoning_tokens == 4 and meter.usage().cost == pytest.approx(PRICE.cost(recorded))


# ------------------------------------------------------------------ the run's spend (models/budget.py)
def test_admission_goes_alone_until_a_call_is_priced_then_reserves_the_costliest(tmp_path):
    budget = RunBudget(BudgetSpec(directory=str(tmp_path / "b"), limit=1.0))

    async def go():
        first = await budget.admit()
        waiting = asyncio.ensure_future(budget.admit())  # no call priced yet: the first goes alone
        await asyncio.sleep(0.3)
        assert not waiting.done()
        first.close(0.3)
        second = await asyncio.wait_for(waiting, 5)
        third = await asyncio.wait_for(budget.admit(), 5)  # 0.3 + 2 x 0.3 <= 1: two in flight
        fourth = asyncio.ensure_future(budget.admit())  # 0.3 + 3 x 0.3 > 1: waits
        await asyncio.sleep(0.3)
        assert not fourth.done()
        second.close(0.3)
        third.close(0.3)
        last = await asyncio.wait_for(fourth, 5)  # alone now: the one call the budget may be passed by
        last.close(0.3)
        with pytest.raises(LimitExceeded) as stop:
            await budget.admit()
        return stop.value

    stop = asyncio.run(go())
    assert stop.limit == "max_cost" and "--max-cost $1" in str(stop)
    assert budget.spent() == pytest.approx(1.2) and budget.reached()


def _admit_and_hang(directory: str, ready) -> None:
    async def hold():
        await RunBudget(BudgetSpec(directory=directory, limit=10.0)).admit()
        ready.set()
        await asyncio.sleep(600)

    asyncio.run(hold())


def test_a_killed_agents_call_stops_counting_in_flight(tmp_path):
    directory = str(tmp_path / "b")
    ready = multiprocessing.get_context("fork").Event()
    child = multiprocessing.get_context("fork").Process(target=_admit_and_hang, args=(directory, ready))
    child.start()
    try:
        assert ready.wait(30)
        budget = RunBudget(BudgetSpec(directory=directory, limit=10.0))
        assert budget._try_admit() is None  # the other process's call is in flight, none priced yet
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        admitted = budget._try_admit()
        assert admitted is not None  # the kernel dropped its lock: not in flight any more
        admitted.close(0.0)
    finally:
        if child.is_alive():
            os.kill(child.pid, signal.SIGKILL)
        child.join(30)


# ------------------------------------------------------------------ preflight: prices needed
@pytest.mark.parametrize("flag", ["--max-cost", "--max-instance-cost"])
def test_a_budget_without_prices_is_refused_naming_the_model(tmp_path, flag):
    from harness.config import RunConfiguration

    data, _ = dataset_42(tmp_path / "data", ["p0"])
    config = tmp_path / "models.toml"
    config.write_text('[llm.cheap]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nprice_input_per_1k = 1.0\n'
                      'price_output_per_1k = 1.0\n[llm.judge]\nmodel = "j"\nbase_url = "http://127.0.0.1:9/v1"\n')
    with pytest.raises(InputError) as refused:
        RunConfiguration.from_flags(dataset=data, model="cheap", config=config, scorers=["gaia", "llm_judge"],
                                    judge_model="judge", output={"dir": tmp_path / "o"},
                                    **({"execution": {"max_cost": 1.0}} if flag == "--max-cost"
                                       else {"limits": {"max_instance_cost": 1.0}}))
    assert flag in str(refused.value) and "--judge-model judge" in str(refused.value)
    proc = harness("run", "--dataset", data, "--model", "judge", "--config", config, "--output-dir",
                   out_dir(tmp_path), flag, "1", timeout=120)
    assert proc.returncode == 2, explain(proc)
    assert flag in proc.stderr and "--model judge" in proc.stderr and "price_input_per_1k" in proc.stderr, explain(proc)


@pytest.mark.parametrize(("flag", "where"), [(["--max-cost", "inf"], "--max-cost"),
                                           (["--max-instance-cost", "inf"], "--max-instance-cost"),
                                           (["--max-cost", "1"], "price_input_per_1k")])
def test_an_infinite_budget_or_price_is_refused_before_any_container(tmp_path, flag, where):
    """JSON has no infinity: the agent's request carried null and every instance errored (exit 3)."""
    data, _ = dataset_42(tmp_path / "data", ["p0"])
    config = tmp_path / "models.toml"
    price = "inf" if where == "price_input_per_1k" else "1.0"
    config.write_text(f'[llm.cheap]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nprice_input_per_1k = {price}\n'
                      'price_output_per_1k = 1.0\n')
    out = out_dir(tmp_path)
    proc = harness("run", "--dataset", data, "--model", "cheap", "--config", config, "--output-dir", out, *flag,
                   timeout=120)
    assert proc.returncode == 2, explain(proc)
    assert where in proc.stderr and "finite" in proc.stderr, explain(proc)
    assert not out.exists()


# ------------------------------------------------------------------ a run stopped by --max-cost
CALL = 0.01  # dollars: 1000 prompt tokens at $0.01 per 1000


@pytest.mark.docker
@pytest.mark.slow
def test_max_cost_stops_a_run_of_two_workers_within_one_call_of_the_budget(tmp_path, image):
    ids = [f"b{i}" for i in range(8)]
    data, _ = dataset_42(tmp_path / "data", ids)
    out = out_dir(tmp_path)
    budget = 0.105
    script = [tool_calls(("run_python", {"code": "print(6*7)"}), usage=(1000, 0)),
              text("<solution>42</solution>", usage=(1000, 0))] * 8
    with FakeOpenAI(script, delay=1.5) as server:
        config = fake_config(tmp_path / "models.toml", server.base_url, prices=(CALL, 0.0))
        env = {"HARNESS_PROGRESS_EVERY": "1"}
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", "plain", "--workers", 2, "--max-cost", budget, env=env, timeout=600)
        answered = sum(status == 200 for status, _ in server.responses)
        in_flight_at_once = server.max_in_flight
    assert proc.returncode == 3, explain(proc)
    assert f"--max-cost ${budget:g} reached" in proc.stderr, explain(proc)
    got = rows(out)
    spent = sum(r["usage"]["cost"] for r in got)
    assert answered * CALL <= budget + CALL + 1e-9, (answered, explain(proc))  # the provider's view
    assert spent == pytest.approx(answered * CALL)
    assert in_flight_at_once == 2, explain(proc)  # the workers' calls (1.5 s each) overlapped while the budget was far
    assert any(r["status"] == "limit" and r["limit"] == "max_cost" for r in got) or len(got) < len(ids), got
    assert len(got) < len(ids) and "not started" in proc.stderr, explain(proc)
    for r in got:
        if r["limit"] == "max_cost":
            assert r["scores"]["gaia"]["correct"] is False  # scored like any limit: no answer
    report = json.loads((out / "report.json").read_text())
    assert report["costs"]["total"] == pytest.approx(spent) and report["n_limit"].get("max_cost", 0) >= 0
    progress = [line for line in proc.stderr.splitlines() if line.startswith("progress:") and "cost $" in line]
    assert progress and "projected $" in progress[-1], explain(proc)
    print(progress[-1])


# ------------------------------------------------------------------ the judge's cost
JUDGE_USAGE = (500, 50)  # at $1 in, $2 out per 1000: $0.6 a verdict


def _with_judge(config, judge_url: str):
    config.write_text(config.read_text() + f'\n[llm.judge]\nmodel = "judge-1"\nbase_url = "{judge_url}"\n'
                                           f'api_key_env = "{FAKE_KEY_ENV}"\nmax_retries = 0\n'
                                           'price_input_per_1k = 1.0\nprice_output_per_1k = 2.0\n')
    return config


@pytest.mark.docker
def test_the_judges_cost_is_in_the_row_the_report_and_added_by_a_rescore(tmp_path, image):
    data, config = dataset_42(tmp_path / "data", ["j0", "j1"])
    out = out_dir(tmp_path)
    verdict = text("VERDICT: CORRECT", usage=JUDGE_USAGE)
    with FakeOpenAI([], default=verdict) as judge:
        _with_judge(config, judge.base_url)
        proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                       "--scorer", "gaia", "--scorer", "llm_judge", "--judge-model", "judge", timeout=300)
        assert proc.returncode == 0, explain(proc)
        each = (500 * 1.0 + 50 * 2.0) / 1000
        for row in rows(out):
            assert row["scores"]["llm_judge"]["details"]["usage"]["cost"] == pytest.approx(each)
            assert row["judge_usage"]["llm_calls"] == 1 and row["judge_usage"]["cost"] == pytest.approx(each)
        report = json.loads((out / "report.json").read_text())
        assert report["costs"]["judge"] == pytest.approx(2 * each) and report["costs"]["judge_calls"] == 2
        assert report["costs"]["total"] == pytest.approx(report["cost"] + 2 * each)
        assert "judge $1.2000 / 2" in proc.stdout, explain(proc)

        again = harness("score", out, "--scorer", "gaia", "--scorer", "llm_judge", "--judge-model", "judge",
                        "--config", config, timeout=300)
        assert again.returncode == 0, explain(again)
    for row in rows(out):  # the rescore's verdict and its cost added to the run's
        assert row["scores"]["llm_judge"]["details"]["usage"]["cost"] == pytest.approx(each)
        assert row["judge_usage"]["llm_calls"] == 2 and row["judge_usage"]["cost"] == pytest.approx(2 * each)
    report = json.loads((out / "report.json").read_text())
    assert report["costs"]["judge"] == pytest.approx(4 * each) and report["costs"]["judge_calls"] == 4
    assert sum(report["costs"]["per_instance"].values()) == pytest.approx(report["costs"]["total"])
