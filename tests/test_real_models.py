"""What real models did, round 2 (issue 41), each replayed by the scripted OpenAI-compatible server
(tests/fakes/openai_server.py) the test starts: a reply cut at the server's 512-token cap, a call that hangs
past its deadline, a judge that rejects a right paraphrase, a base URL without /v1; and the small ones (a
judge named without a TOML, the hints of a model made from flags, Gaia2's "None" rationale). The runs end to
end, in real sandboxes, are tests/faults/test_real_models.py.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from harness.benchmarks.gaia2.scorer import Gaia2Scorer
from harness.config import RunConfiguration, Scoring, TomlConfig
from harness.errors import InputError, ModelError
from harness.models.completion import completer
from harness.models.config import ModelSection
from harness.models.factory import chat_model
from harness.models.meter import Meter
from harness.models.probe import ModelCheck, probe
from harness.results.model import ResultRow
from harness.runner.appends import append_verdict, judge_calls
from harness.scoring.base import ScoreContext
from harness.scoring.gaia import GaiaScorer
from harness.scoring.judge import LLMJudgeScorer
from harness.traces import Tracer, read_events
from harness.traces.forensics import read_facts
from tests.fakes.openai_server import FakeOpenAI, hang, text

LOOPING = "I will call the tool. " * 60  # what the 1.5B wrote, until the server's cap of 512 tokens cut it
REJECT = "The candidate says forty-two; the reference is 42. Not the same form.\nVERDICT: INCORRECT"


def _section(base_url: str, timeout: float = 120) -> ModelSection:
    return ModelSection(name="fake", model="fake-model-1", base_url=base_url, timeout=timeout, max_retries=0)


def test_a_reply_cut_at_the_token_cap_keeps_its_finish_reason_in_the_trace(tmp_path):
    path = tmp_path / "trace.jsonl"
    with FakeOpenAI([text(LOOPING, usage=(300, 512), finish="length"), text("<solution>42</solution>")]) as server:
        tracer = Tracer(path)
        chat = chat_model(_section(server.base_url), Meter(max_tokens=None, max_steps=None, tracer=tracer), None)

        async def two():
            await chat.complete([{"role": "user", "content": "6*7?"}], [])
            await chat.complete([{"role": "user", "content": "6*7?"}], [])
            await chat.close()

        asyncio.run(two())
        tracer.close()
    calls = [e for e in read_events(path) if e["type"] == "model_call"]
    assert [c.get("finish_reason") for c in calls] == ["length", "stop"]  # before: no finish_reason
    assert read_facts(path).cut_replies == 1


def test_a_call_cut_at_its_deadline_names_where_the_deadline_comes_from():
    with FakeOpenAI([hang(10)]) as server:
        meter = Meter(max_tokens=None, max_steps=None, call_deadline=1.0)  # --instance-timeout 2
        chat = chat_model(_section(server.base_url, timeout=120), meter, None)

        async def one():
            try:
                await chat.complete([{"role": "user", "content": "6*7?"}], [])
            finally:
                await chat.close()

        with pytest.raises(ModelError) as caught:
            asyncio.run(one())
    said = str(caught.value)
    assert "no reply within 1 s" in said
    assert "deadline is 1 s, 0.5 of --instance-timeout 2" in said and "longer --instance-timeout" in said, said


def test_the_judges_prompt_and_reply_go_to_the_trace_before_the_verdict(tmp_path):
    with FakeOpenAI([text(REJECT)]) as server:
        judge = LLMJudgeScorer(completer(_section(server.base_url)))
        score = judge.score("forty-two", "42", context=ScoreContext(question="What is 6*7?"))
    scores = {"llm_judge": score.model_dump()}
    assert score.correct is False
    calls = judge_calls(scores)
    assert len(calls) == 1 and "judge_call" not in scores["llm_judge"]["details"]  # out of the row
    assert scores["llm_judge"]["details"]["reply"] == REJECT  # the row keeps the judge's words
    path = tmp_path / "trace.jsonl"
    path.write_text("")
    row = ResultRow(instance_id="t", status="ok", answer="forty-two", target="42", scores=scores)
    assert append_verdict(path, row, "run", calls) is None
    events = read_events(path)
    assert [e["type"] for e in events] == ["judge_call", "verdict"]
    assert events[0]["judge"] == "llm_judge" and events[0]["reply"] == REJECT
    assert "forty-two" in events[0]["messages"][0]["content"]  # what the judge saw


def test_a_judge_named_openai_compatible_needs_no_toml():
    scoring = Scoring.from_flags(["gaia", "llm_judge"], "openai-compatible/judge-1", TomlConfig(None),
                                 "http://127.0.0.1:9/v1", None)  # before: "no --config was given"
    assert scoring.judge is not None and scoring.judge.model == "judge-1"
    assert scoring.judge.base_url == "http://127.0.0.1:9/v1" and "--judge-model" in scoring.judge.where()
    with pytest.raises(InputError, match="--model-base-url"):
        Scoring.from_flags(["llm_judge"], "openai-compatible/judge-1", TomlConfig(None))


def test_a_model_made_from_flags_is_never_told_to_edit_a_section_it_has_not(tmp_path):
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": "t", "question": "Q?", "answer": "1"}) + "\n")
    with pytest.raises(InputError) as caught:
        RunConfiguration.from_flags(dataset=data, model="openai-compatible/qwen", model_base_url="http://127.0.0.1:9/v1",
                                    output={"dir": tmp_path / "o"}, execution={"max_cost": 1.0})
    said = str(caught.value)
    assert "[llm.openai-compatible/" not in said and "[llm.NAME]" in said and '"qwen"' in said, said
    section = ModelSection(name="openai-compatible/qwen", model="qwen", base_url="http://127.0.0.1:9/v1")
    assert "[llm.openai-compatible/" not in section.set_in("vision = true", ".model_info")


def test_a_base_url_without_v1_gets_a_hint():
    with FakeOpenAI([]) as server:
        bare = server.base_url.removesuffix("/v1")
        with pytest.raises(InputError) as caught:
            probe(ModelCheck(flag="--model", section=_section(bare, timeout=10)))
    assert "404" in str(caught.value) and f"try {bare}/v1" in str(caught.value), str(caught.value)


@pytest.mark.parametrize("rationale", ["None", None, ""])
def test_a_gaia2_pass_without_a_rationale_says_so(rationale):
    verdict = {"verdict": "pass", "rationale": rationale, "oracle_actions": [], "turns": 1, "turns_done": 1}
    score = Gaia2Scorer().score(None, "pass", context=ScoreContext(verdicts={"gaia2": verdict}))
    assert score.explanation == "ARE's judge passed the run"  # before: "None"


@pytest.mark.parametrize("answer,said", [("[247]", "number: '[247]' is no number vs 247"),
                                         ("247", "number: 247 vs 247"), ("4.5", "number: 4.5 vs 247")])
def test_a_number_the_scorer_cannot_read_is_said_so(answer, said):
    score = GaiaScorer().score(answer, "247", context=ScoreContext())
    assert score.explanation == said  # before: "number: inf vs 247.0"


def test_a_gaia2_score_counts_the_turns_of_its_scenario_not_every_message_to_the_user():
    # A one-turn scenario whose agent told the user nine times said `turns_done: 9` (issue 41, small ones).
    from harness.benchmarks.gaia2.scorer import Gaia2Scorer
    from harness.scoring.base import ScoreContext

    verdict = {"verdict": "pass", "rationale": "None", "oracle_actions": [], "turns": 1, "turns_done": 9}
    score = Gaia2Scorer().score(None, "pass", context=ScoreContext(verdicts={"gaia2": verdict}))
    assert score.details["turns_done"] == 1 and score.details["turns"] == 1, score.details
    assert score.details["messages_to_user"] == 9
