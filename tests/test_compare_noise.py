"""`harness compare` and `harness noise`'s figures against independent computations on known inputs: the exact
McNemar test (scipy's binomial test and the binomial sum by hand), the paired bootstrap, every instance counted,
the conclusion in words, a measured noise floor used and named, an alias re-pointed and another judge named,
runs of another dataset refused, a model that answers wrong with a known probability measured, a judge's churn
told apart from the agent's. Synthetic run directories and fake model servers: no Docker."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from harness.cli import app
from harness.models.config import ModelSection
from harness.models.meter import Meter
from harness.report import html as pages
from harness.report.noise import measure, pair_flips
from harness.report.significance import mcnemar, min_detectable, paired_bootstrap
from harness.traces import Tracer
from tests.fakes.flaky_model import FlakyModel
from tests.fakes.openai_server import FakeOpenAI, text
from tests.test_html_report import make_run_dir

KEY_ENV = "HARNESS_TEST_COMPARE_KEY"


def exact_by_hand(b: int, c: int) -> float:
    """Two-sided exact McNemar: twice the smaller binomial tail at 1/2, at most 1."""
    n, k = b + c, min(b, c)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0


@pytest.mark.parametrize("b,c", [(1, 9), (0, 5), (3, 3), (10, 2), (7, 18), (0, 0), (25, 40)])
def test_mcnemar_matches_the_library_and_the_binomial_sum(b, c):
    p = mcnemar(b, c)
    assert p == pytest.approx(exact_by_hand(b, c), rel=1e-12)
    if b + c:
        assert p == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-12)
    assert mcnemar(1, 9) == pytest.approx(0.021484375)  # a textbook table: 11/512
    assert mcnemar(c, b) == p  # symmetric


def test_paired_bootstrap_holds_the_mean_and_is_the_same_each_time():
    pairs = [(0.0, 1.0), (0.0, 0.5), (1.0, 1.0), (0.5, 1.0), (0.0, 0.0), (1 / 3, 2 / 3)] * 4
    low, high = paired_bootstrap(pairs)
    mean = sum(o - b for b, o in pairs) / len(pairs)
    assert low <= mean <= high and low > 0
    assert paired_bootstrap(pairs) == (low, high)
    assert paired_bootstrap([(0.5, 0.5)] * 5) == (0.0, 0.0)


def test_min_detectable_shrinks_with_the_run_and_grows_with_the_noise():
    assert min_detectable(0.2, 100) == pytest.approx((1.959964 + 0.841621) * math.sqrt(0.2 / 100), rel=1e-5)
    assert min_detectable(0.2, 400) == pytest.approx(min_detectable(0.2, 100) / 2)
    assert min_detectable(0.0, 50) == 0.0 and min_detectable(0.1, 0) is None


def fixing(n: int) -> frozenset[int]:
    """The ids of make_run_dir's ok instances that failed: flipped, each is fixed."""
    return frozenset(i for i in range(n) if i % 6 in (1, 3))


def compare_cli(*args: str):
    return CliRunner().invoke(app, ["compare", *map(str, args)])


def test_compare_counts_every_instance_and_says_the_difference_is_beyond_noise(tmp_path):
    a = make_run_dir(tmp_path / "a", 60)
    b = make_run_dir(tmp_path / "b", 60, flip=fixing(60))
    lines = (b / "output.jsonl").read_text().splitlines()
    (b / "output.jsonl").write_text("\n".join(lines[:-4]) + "\n")  # b has not finished its last 4
    result = compare_cli(a, b)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "fixed 19, broken 0, unchanged 37 (19 passing, 18 failing), not comparable 4" in out
    assert "distinguishable from noise: delta +33.9%, exact McNemar test p = 3.81e-06 (19 fixed, 0 broken)" in out
    assert "no measured noise floor" in out
    (c,) = json.loads(compare_cli(a, b, "--json").output)
    assert c["p_value"] == pytest.approx(exact_by_hand(19, 0))
    assert c["distinguishable"] is True and c["not_comparable"] == [f"task-{i:04d}" for i in range(56, 60)]
    assert len(c["fixed"]) + len(c["broken"]) + len(c["unchanged_pass"]) + len(c["unchanged_fail"]) \
        + len(c["not_comparable"]) == 60


def test_a_small_difference_is_said_to_be_noise(tmp_path):
    a = make_run_dir(tmp_path / "a", 24)
    b = make_run_dir(tmp_path / "b", 24, flip=frozenset({1, 3}))
    result = compare_cli(a, b)
    assert result.exit_code == 0, result.output
    assert "NOT distinguishable from noise: delta +8.3%, exact McNemar test p = 0.5 (2 fixed, 0 broken)" \
        in result.output


def write_noise(run: Path, flip_rate: float, reruns: int = 3, n: int = 20) -> None:
    (run / "noise.json").write_text(json.dumps({"flip_rate": flip_rate, "reruns": reruns, "n": n}))


def test_compare_uses_the_measured_noise_floor_and_names_it(tmp_path):
    a = make_run_dir(tmp_path / "a", 60)
    b = make_run_dir(tmp_path / "b", 60, flip=fixing(60))
    write_noise(a, 0.9)  # a very noisy configuration: a third of the instances flipping is within it
    (c,) = json.loads(compare_cli(a, b, "--json").output)
    assert c["noise"]["run"] == "a" and c["noise"]["min_detectable"] == pytest.approx(min_detectable(0.9, 60))
    assert c["distinguishable"] is False
    out = compare_cli(a, b).output
    assert "NOT distinguishable from noise: delta +33.3% is below the noise floor" in out
    assert "the measured noise floor of a (flip rate 90.0% over 3 reruns" in out
    write_noise(b, 0.01)  # the larger of the two floors is used
    (c,) = json.loads(compare_cli(a, b, "--json").output)
    assert c["noise"]["run"] == "a"
    write_noise(a, 0.02)
    (c,) = json.loads(compare_cli(a, b, "--json").output)
    assert c["distinguishable"] is True and c["noise"]["flip_rate"] == 0.02


def with_epochs(run: Path, k: int, passes: dict[int, int]) -> Path:
    """The run as --epochs k, instance i passing in passes.get(i, its own verdict * k) of its k epochs."""
    config = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**config, "epochs": k, "reducers": ["mean"]}))
    (run / "report.json").unlink()
    rows = [json.loads(line) for line in (run / "output.jsonl").read_text().splitlines()][1:]
    lines = []
    for i, row in enumerate(rows):
        good = passes.get(i, k if row["correct"] else 0)
        for e in range(1, k + 1):
            right = e <= good
            lines.append(json.dumps({**row, "epoch": e, "correct": right if row["status"] != "error" else None,
                                     "scores": {} if row["status"] == "error" else {"gaia": {
                                         "scorer": "gaia", "correct": right, "value": float(right)}}}))
    (run / "output.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_epochs_pair_the_pass_rates_with_a_bootstrap(tmp_path):
    a = with_epochs(make_run_dir(tmp_path / "a", 24), 3, {})
    b = with_epochs(make_run_dir(tmp_path / "b", 24), 3, {i: 2 for i in range(24) if i % 6 in (1, 3)})
    (c,) = json.loads(compare_cli(a, b, "--json").output)
    assert c["graded"] and c["p_value"] is None
    low, high = c["bootstrap_ci95"]
    assert low <= c["delta"] <= high and c["delta"] == pytest.approx(8 * (2 / 3) / 24)
    assert "paired bootstrap 95% interval" in c["conclusion"]


def trace_calls(run: Path, response_model: str, fingerprint: str, judge: str | None = None) -> None:
    config = json.loads((run / "run.json").read_text())
    config["model_settings"] = {"name": "fake-model", "model": "gpt-alias"}
    if judge:
        config["scorers"] = ["llm_judge", f"judge={judge}"]
    (run / "run.json").write_text(json.dumps(config))
    for trace in (run / "traces").glob("*.jsonl"):
        events = [json.loads(line) for line in trace.read_text().splitlines()]
        for e in events:
            if e["type"] == "model_call":
                e.update(response_model=response_model, fingerprint=fingerprint, sampling={"temperature": 0})
        trace.write_text("".join(json.dumps(e) + "\n" for e in events))


def test_an_alias_re_pointed_between_runs_is_named(tmp_path):
    a = make_run_dir(tmp_path / "a", 12)
    b = make_run_dir(tmp_path / "b", 12)
    trace_calls(a, "gpt-alias-0613", "fp_aaa")
    trace_calls(b, "gpt-alias-1106", "fp_bbb")
    out = compare_cli(a, b).output
    assert ("calls: model fake-model answered as gpt-alias-0613 in the first run and gpt-alias-1106 in the second "
            "(both asked for 'gpt-alias'): the alias was re-pointed") in out
    assert "system_fingerprint fp_aaa vs fp_bbb" in out
    trace_calls(b, "gpt-alias-0613", "fp_aaa")
    assert "calls:" not in compare_cli(a, b).output
    (c,) = pages.build_data([a, b], with_traces=True)["comparisons"]  # the HTML report says it too
    assert c["calls"] == [] and c["conclusion"]


def test_another_judge_is_named(tmp_path):
    a = make_run_dir(tmp_path / "a", 6)
    b = make_run_dir(tmp_path / "b", 6)
    trace_calls(a, "m", "fp", judge="judge-small")
    trace_calls(b, "m", "fp", judge="judge-large")
    assert "calls: another judge: llm_judge, judge=judge-small vs llm_judge, judge=judge-large" \
        in compare_cli(a, b).output


def test_a_judge_whose_alias_was_re_pointed_is_named(tmp_path, monkeypatch):
    """The LLM judge's real client against a server answering as another model id (and build): each run's
    judge_call events keep the reply's model id and fingerprint (the real scoring path: scorer, judge_calls, trace),
    and the comparison names the judge's alias re-pointed (before: judge_call kept neither; only the scorers'
    names were compared, which are the same)."""
    from harness.models.completion import completer
    from harness.runner.appends import judge_calls
    from harness.scoring.base import ScoreContext
    from harness.scoring.judge import LLMJudgeScorer

    monkeypatch.setenv(KEY_ENV, "sk-test")
    runs = []
    for name, answers_as, fingerprint in (("a", "judge-0613", "fp_a"), ("b", "judge-1106", "fp_b")):
        run = make_run_dir(tmp_path / name, 4)
        with FakeOpenAI([text("VERDICT: CORRECT")] * 4, fingerprint=fingerprint, answers_as=answers_as) as server:
            section = ModelSection(name="judge", model="judge-alias", base_url=server.base_url, api_key_env=KEY_ENV,
                                   max_retries=0, timeout=30)
            scorer = LLMJudgeScorer(completer(section))
            for trace in sorted((run / "traces").glob("*.jsonl")):
                score = scorer.score("4", "4", context=ScoreContext(question="2+2?"))
                (call,) = judge_calls({"llm_judge": score.model_dump()})
                with trace.open("a") as fh:
                    fh.write(call.model_dump_json() + "\n")
        runs.append(run)
    (call,) = [e for e in map(json.loads, next((runs[1] / "traces").glob("*.jsonl")).read_text().splitlines())
               if e["type"] == "judge_call"]
    assert call["response_model"] == "judge-1106" and call["fingerprint"] == "fp_b"
    out = compare_cli(*runs).output
    assert ("judge llm_judge's model answered as judge-0613 in the first run and judge-1106 in the second: "
            "the alias was re-pointed") in out
    assert "judge llm_judge's model: system_fingerprint fp_a vs fp_b" in out


def test_a_comparison_across_datasets_is_refused_unless_forced(tmp_path):
    a, b = make_run_dir(tmp_path / "a", 12), make_run_dir(tmp_path / "b", 12, flip=frozenset({1}))
    for run, fp in ((a, "aaaa"), (b, "bbbb")):
        config = json.loads((run / "run.json").read_text())
        (run / "run.json").write_text(json.dumps({**config, "dataset_fingerprint": fp}))
    result = compare_cli(a, b)
    assert result.exit_code == 2
    assert "b vs a: not compared: another dataset (dataset_fingerprint aaaa vs bbbb)" in result.output
    assert "--force" in result.output
    result = compare_cli(a, b, "--force")
    assert result.exit_code == 0 and "compared anyway: another dataset" in result.output


def test_compare_writes_the_html_report_with_the_conclusion(tmp_path):
    a = make_run_dir(tmp_path / "a", 12)
    b = make_run_dir(tmp_path / "b", 12, flip=fixing(12))
    out = tmp_path / "cmp.html"
    result = compare_cli(a, b, "--html", out)
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "cmp-conclusion" in page and "NOT distinguishable from noise" in page


# -- what makes calls comparable, recorded --------------------------------------------------------------------

async def _plain(section: ModelSection, meter: Meter) -> None:
    from harness.models.chat import OpenAIChat

    chat = OpenAIChat(section, meter)
    try:
        await chat.complete([{"role": "user", "content": "hi"}], [])
    finally:
        await chat.close()


async def _autogen(section: ModelSection, meter: Meter) -> None:
    from autogen_core.models import UserMessage

    from harness.agents.autogen.models import build_client

    client = build_client(section.model_copy(update={"model_info": {"function_calling": True}}), meter, None)
    try:
        await client.create([UserMessage(content="hi", source="user")])
    finally:
        await client.close()


@pytest.mark.parametrize("client", [_plain, _autogen], ids=["plain", "autogen"])
def test_a_model_call_records_the_reply_s_model_id_fingerprint_and_the_sampling_sent(tmp_path, monkeypatch, client):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeOpenAI([text("<solution>1</solution>")], fingerprint="fp_42", answers_as="gpt-x-2026-01") as server:
        section = ModelSection(name="fake", model="gpt-x", base_url=server.base_url, api_key_env=KEY_ENV,
                               temperature=0.0, seed=7, max_retries=0, timeout=30)
        tracer = Tracer(tmp_path / "trace.jsonl")
        asyncio.run(client(section, Meter(max_tokens=None, max_steps=None, call_deadline=30, tracer=tracer)))
        assert server.chat_requests[0]["json"]["seed"] == 7  # sent where the provider takes one
    (call,) = [e for e in map(json.loads, (tmp_path / "trace.jsonl").read_text().splitlines())
               if e["type"] == "model_call"]
    assert call["response_model"] == "gpt-x-2026-01" and call["fingerprint"] == "fp_42"
    assert call["sampling"]["temperature"] == 0.0 and call["sampling"]["seed"] == 7
    assert ModelSection(name="x", seed=7).public()["seed"] == 7  # said in run.json
    assert "seed" not in ModelSection(name="x").public()  # a run.json of before: resumes unchanged


# -- the noise floor -------------------------------------------------------------------------------------------

def asking(server: FakeOpenAI):
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)

    def ask(question: str) -> str:
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
        return reply.choices[0].message.content or ""

    return ask


def test_a_model_that_answers_wrong_with_a_known_probability_is_measured_within_its_interval():
    questions = {f"question {i}?": f"{i}" for i in range(40)}
    p_wrong, k = 0.3, 4
    runs: list[dict[str, tuple[bool, str]]] = [{} for _ in range(k + 1)]
    with FlakyModel(questions, p_wrong=p_wrong, seed=11) as server:
        ask = asking(server)
        for run in runs:
            for i, (q, a) in enumerate(questions.items()):
                said = ask(q)
                run[f"q{i}"] = (said == f"<solution>{a}</solution>", said)
        assert len(server.draws) == 40 * (k + 1)
    m = measure(runs[0], runs[1:], [], run_size=40, ids=[f"q{i}" for i in range(40)])
    expected = 2 * p_wrong * (1 - p_wrong)  # two runs of one instance disagree
    low, high = m["flip_rate_ci95"]
    assert low <= expected <= high, (m["flip_rate"], low, high)
    assert m["reruns"] == k and len(m["headline"]) == k + 1
    assert min(m["headline"]) <= 1 - p_wrong + 0.2 and m["headline_spread"]["sd"] > 0
    assert m["min_detectable"] == pytest.approx(min_detectable(m["flip_rate"], 40))
    assert m["judge_churn"] == 0.0  # no judge re-judged: deterministic scorers


def test_pair_flips_counts_disagreeing_pairs():
    assert pair_flips([True, True, False]) == pytest.approx(2 / 3)
    assert pair_flips([True]) is None and pair_flips([1, 1, 1, 1]) == 0.0


def test_a_judge_whose_verdicts_flip_is_judge_churn_not_agent_churn(tmp_path, monkeypatch):
    """The agent gives the same answers every time; the judge's verdicts on them flip: the re-judgings of the
    run's own answers (the real rescore path, the judge a fake server) carry the churn, the agent none."""
    from harness.config import Scoring, TomlConfig
    from harness.runner.noise import outcomes, rejudge

    monkeypatch.setenv(KEY_ENV, "sk-test")
    run = make_run_dir(tmp_path / "run", 6)
    config = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**config, "dataset_fingerprint": "d", "image": "i"}))
    ids = [f"task-{i:04d}" for i in range(6) if i != 5]  # task-0005 errored
    verdicts = ["VERDICT: CORRECT", "VERDICT: INCORRECT"]
    with FakeOpenAI([text(verdicts[(i // 5 + i % 5) % 2]) for i in range(15)]) as judge:
        config = tmp_path / "judge.toml"
        config.write_text(f'[llm.judge]\nmodel = "j"\nbase_url = "{judge.base_url}"\napi_key_env = "{KEY_ENV}"\n'
                          "max_retries = 0\n")
        scoring = Scoring.from_flags(["llm_judge"], "judge", TomlConfig(config))
        judged = [rejudge(run, ids, tmp_path / f"rejudge-{k}", scoring) for k in range(3)]
    original = outcomes(run, ids)
    assert all(len(j) == 5 for j in judged)
    m = measure(original, [original, original, original], judged, run_size=6, ids=ids)
    assert m["answer_flip_rate"] == 0.0 and m["agent_churn"] == 0.0
    assert m["judge_churn"] > 0.3 and m["flip_rate"] == 0.0  # the reruns' own verdicts: the agent's answers
    assert [j["task-0000"] for j in judged] == [True, False, True]
    assert json.loads((run / "output.jsonl").read_text().splitlines()[1])["scores"].keys() == {"gaia"}  # untouched
