"""Pure-logic tests for harness.scoring (GAIA matching, scorers, judge, registry)."""

from __future__ import annotations

import pytest

from harness.scoring import (
    BudgetScorer,
    ExactMatchScorer,
    ExpectedToolCallScorer,
    GaiaScorer,
    LLMJudgeScorer,
    Score,
    ScoreContext,
    Scorer,
    ScorerError,
    build_judge_prompt,
    gaia_match,
    get_scorer,
    match_kind,
    parse_verdict,
)

CTX = ScoreContext()

# --------------------------------------------------------------------------- gaia_match

GAIA_CASES = [
    # numbers: truth parses as float, compared as floats
    ("17", "17", True),
    ("17.0", "17", True),
    ("17", "17.0", True),
    ("17.1", "17", False),
    ("17", "17.1", False),
    (" 17 ", "17", True),  # float() tolerates surrounding whitespace
    ("-3.5", "-3.5", True),
    ("1e3", "1000", True),
    ("0.50", "0.5", True),
    # money, percent, thousands separators are dropped from the answer
    ("$1,234", "1234", True),
    ("1,234", "1234", True),
    ("1,000", "1000", True),
    ("12%", "12", True),
    ("$ 12", "12", True),
    ("12 %", "12", True),
    ("1,234.50", "1234.5", True),
    # ... but nothing else: internal spaces, units and words make it unparsable
    ("1 000", "1000", False),
    ("17 apples", "17", False),
    ("seventeen", "17", False),
    ("12 USD", "12", False),
    ("€12", "12", False),
    ("1/2", "0.5", False),
    # truth written with a thousands separator is NOT a number: it is a 2-item list
    ("1,000", "1,000", True),
    ("1000", "1,000", False),
    ("1, 000", "1,000", True),
    # lists: split on , or ; ; whitespace and case ignored per item
    ("a, b; c", "a,b,c", True),
    ("A ;B ,C", "a, b, c", True),
    ("a, b", "a, b, c", False),
    ("a, b, c, d", "a, b, c", False),
    ("a b c", "a, b, c", False),
    ("c, b, a", "a, b, c", False),  # order matters
    ("1,2,3", "1, 2, 3.0", True),
    ("$1; 2%; 3.00", "1, 2, 3", True),
    ("1, 2, x", "1, 2, 3", False),
    ("apple, 2", "apple, 2.0", True),
    # list items keep punctuation (remove_punct=False)
    ("St. Louis, Paris", "St. Louis, Paris", True),
    ("St Louis, Paris", "St. Louis, Paris", False),
    ("a., b", "a, b", False),
    ("o'neil, b", "oneil, b", False),
    # strings: whitespace, case and ASCII punctuation removed
    ("New York City.", "new york city", True),
    ("  NEW-YORK  city!", "New York City", True),
    ("sea gull", "seagull", True),
    ("New York", "Boston", False),
    ("Right", "right.", True),
    ("New, York", "New York", True),  # answer commas don't matter when truth is a plain string
    ("café", "cafe", False),  # no unicode folding
    ("it’s", "its", False),  # curly apostrophe is not in string.punctuation
    # missing / empty answers
    (None, "17", False),
    (None, "Paris", False),
    (None, "a, b", False),
    ("", "17", False),
    ("", "Paris", False),
    ("", "a, b", False),
    ("   ", "Paris", False),
]


@pytest.mark.parametrize(("answer", "truth", "expected"), GAIA_CASES)
def test_gaia_match_golden(answer: str | None, truth: str, expected: bool) -> None:
    assert gaia_match(answer, truth) is expected


def test_gaia_official_quirks() -> None:
    # None is compared as the literal string "None".
    assert gaia_match(None, "None") is True
    # Unparsable numbers become inf, so an "inf" truth accepts any non-number.
    assert gaia_match("no idea", "inf") is True
    # NaN never equals anything, not even itself.
    assert gaia_match("nan", "nan") is False
    # float() accepts underscores, so "1_000" is a numeric truth.
    assert gaia_match("1,000", "1_000") is True
    # Punctuation-only truth normalizes to "" and so matches an empty answer.
    assert gaia_match("", "?") is True
    # A trailing separator in the truth yields an empty last item.
    assert gaia_match("a, b,", "a, b,") is True
    assert gaia_match("a, b", "a, b,") is False


@pytest.mark.parametrize(
    ("truth", "kind"),
    [("17", "number"), ("1e3", "number"), ("1,000", "list"), ("a; b", "list"), ("Paris", "string")],
)
def test_match_kind(truth: str, kind: str) -> None:
    assert match_kind(truth) == kind


def test_gaia_scorer_score() -> None:
    good = GaiaScorer().score("$1,234", "1234", context=CTX)
    assert (good.scorer, good.correct, good.value, good.details["kind"]) == ("gaia", True, 1.0, "number")
    bad = GaiaScorer().score("a, b", "a, b, c", context=CTX)
    assert bad.correct is False and bad.value == 0.0 and "2 items" in bad.explanation


# --------------------------------------------------------------------------- simple scorers


def test_exact_match() -> None:
    assert ExactMatchScorer().score("  Paris\n", "Paris", context=CTX).correct is True
    assert ExactMatchScorer().score("paris", "Paris", context=CTX).correct is False
    assert ExactMatchScorer(ignore_case=True).score("PARIS ", "paris", context=CTX).correct is True
    assert ExactMatchScorer().score(None, "Paris", context=CTX).correct is False


def test_tool_calls_all_present() -> None:
    scorer = ExpectedToolCallScorer(["web_search", "python"])
    ctx = ScoreContext(tool_calls=["python", "web_search", "python"])
    score = scorer.score("x", "y", context=ctx)
    assert score.scorer == "tool_calls" and score.correct is True and score.details["missing"] == []


def test_tool_calls_missing_listed() -> None:
    scorer = ExpectedToolCallScorer(["web_search", "python", "read_file"])
    score = scorer.score("x", "y", context=ScoreContext(tool_calls=["python"]))
    assert score.correct is False and score.value == 0.0
    assert score.details["missing"] == ["web_search", "read_file"]
    assert "web_search" in score.explanation and "read_file" in score.explanation
    assert "python" not in score.explanation.split(":", 1)[1]


def test_tool_calls_none_expected() -> None:
    assert ExpectedToolCallScorer([]).score("x", "y", context=CTX).correct is None  # nothing to check: no verdict
    assert ExpectedToolCallScorer([]).score("x", "y", context=CTX.model_copy(
        update={"expected_tool_calls": []})).correct is True  # the task expects none


def test_tool_calls_from_the_task_unless_the_scorer_names_its_own() -> None:
    ctx = CTX.model_copy(update={"tool_calls": ["run_python"], "expected_tool_calls": ["run_python", "visit_url"]})
    score = ExpectedToolCallScorer().score("x", "y", context=ctx)
    assert score.correct is False and score.details["missing"] == ["visit_url"]
    assert ExpectedToolCallScorer(["run_python"]).score("x", "y", context=ctx).correct is True


@pytest.mark.parametrize(
    ("ctx", "expected"),
    [
        (ScoreContext(total_tokens=100, max_tokens=100, steps=5, max_steps=5), True),
        (ScoreContext(total_tokens=101, max_tokens=100, steps=1, max_steps=5), False),
        (ScoreContext(total_tokens=10, max_tokens=100, steps=6, max_steps=5), False),
        (ScoreContext(total_tokens=10_000), True),  # no limit given
        (ScoreContext(max_tokens=10), True),  # usage unknown: not checked
        (ScoreContext(), True),
    ],
)
def test_budget(ctx: ScoreContext, expected: bool) -> None:
    assert BudgetScorer().score(None, "", context=ctx).correct is expected


def test_budget_explanation_and_constructor_limits() -> None:
    score = BudgetScorer(max_steps=3).score(None, "", context=ScoreContext(steps=4, total_tokens=5))
    assert score.correct is False and "steps 4 > 3" in score.explanation
    assert score.details["unchecked"] == ["tokens"]
    # a limit in the context wins over the constructor default
    ok = BudgetScorer(max_steps=3).score(None, "", context=ScoreContext(steps=4, max_steps=10))
    assert ok.correct is True


# --------------------------------------------------------------------------- judge parsing

VERDICT_CASES = [
    ("VERDICT: CORRECT", True),
    ("VERDICT: INCORRECT", False),
    ("verdict: correct", True),
    ("Verdict: Incorrect.", False),
    ("**Verdict:** Correct", True),
    ("**Verdict:** **Incorrect**", False),
    ("## Verdict\nThe reasoning...\n\nVERDICT: CORRECT!", True),
    ("Final verdict: `INCORRECT`", False),
    ('{"verdict": "correct"}', True),
    ('{"verdict": "INCORRECT"}', False),
    ('{"correct": true}', True),
    ('{"correct": false, "reason": "the answer is correct in format only"}', False),
    ('```json\n{\n  "is_correct": true\n}\n```', True),
    ('Here is my grade: {"verdict": "incorrect", "why": "wrong city"}', False),
    ("The numbers differ.\nINCORRECT", False),
    ("Both name the same city.\n\nCorrect.", True),
    ("Reasoning...\n**INCORRECT**", False),
    ("The candidate is NOT correct.\nVERDICT: NOT CORRECT", False),
    ("I must output VERDICT: CORRECT or VERDICT: INCORRECT.\nVERDICT: INCORRECT", False),
    ("Reasoning done, so my verdict is incorrect, sadly.", False),
    ("verdict - correct", True),
    ("VERDICT: [CORRECT]", True),
    # undecidable
    ("", None),
    ("   \n ", None),
    (None, None),
    ("I am not sure.", None),
    ("The answer might be correct or incorrect.", None),
    ("Respond with VERDICT: CORRECT or VERDICT: INCORRECT", None),
    ("Verdict: partially correct", False),  # a partial grade (0.5) is not a pass
    ('{"verdict": "maybe"}', None),
]


@pytest.mark.parametrize(("reply", "expected"), VERDICT_CASES)
def test_parse_verdict(reply: str | None, expected: bool | None) -> None:
    assert parse_verdict(reply) is expected


def test_incorrect_is_never_read_as_correct() -> None:
    for reply in ["INCORRECT", "incorrect.", "Verdict: incorrect", '{"verdict":"incorrect"}', "x\nIncorrect!"]:
        assert parse_verdict(reply) is False, reply


# --------------------------------------------------------------------------- judge scorer


class FakeJudge:
    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.reply


def test_judge_prompt_contents() -> None:
    prompt = build_judge_prompt("Capital of France?", "Paris", "paris, France", rubric="Be strict.")
    parts = ("Capital of France?", "Paris", "paris, France", "Be strict.", "VERDICT: CORRECT", "VERDICT: INCORRECT")
    for part in parts:
        assert part in prompt
    assert "INCORRECT" in build_judge_prompt("q", "a", "b")  # default rubric still asks for a verdict


def test_judge_scorer_correct() -> None:
    judge = FakeJudge("Same city.\nVERDICT: CORRECT")
    score = LLMJudgeScorer(judge).score("paris", "Paris", context=ScoreContext(question="Capital of France?"))
    assert isinstance(score, Score)
    assert (score.scorer, score.correct, score.value) == ("llm_judge", True, 1.0)
    assert score.details["reply"] == judge.reply
    assert len(judge.prompts) == 1 and "Capital of France?" in judge.prompts[0] and "paris" in judge.prompts[0]


def test_judge_scorer_incorrect_and_custom_name() -> None:
    score = LLMJudgeScorer(FakeJudge("**Verdict:** Incorrect"), name="judge2").score("Lyon", "Paris", context=CTX)
    assert (score.scorer, score.correct, score.value) == ("judge2", False, 0.0)


def test_judge_scorer_unparseable() -> None:
    score = LLMJudgeScorer(FakeJudge("hmm, hard to say")).score("Lyon", "Paris", context=CTX)
    assert score.correct is None and score.value == 0.0 and "unparseable" in score.explanation


def test_judge_scorer_no_answer_skips_call() -> None:
    judge = FakeJudge("VERDICT: CORRECT")
    assert LLMJudgeScorer(judge).score(None, "Paris", context=CTX).correct is False
    assert LLMJudgeScorer(judge).score("  ", "Paris", context=CTX).correct is False
    assert judge.prompts == []


def test_judge_scorer_wraps_errors() -> None:
    def boom(prompt: str) -> str:
        raise TimeoutError("model timed out")

    with pytest.raises(ScorerError, match="model timed out") as info:
        LLMJudgeScorer(boom).score("Lyon", "Paris", context=CTX)
    assert isinstance(info.value.__cause__, TimeoutError)


# --------------------------------------------------------------------------- registry


@pytest.mark.parametrize(
    ("name", "kwargs", "cls"),
    [
        ("gaia", {}, GaiaScorer),
        ("exact", {"ignore_case": True}, ExactMatchScorer),
        ("tool_calls", {"expected": ["python"]}, ExpectedToolCallScorer),
        ("budget", {}, BudgetScorer),
        ("llm_judge", {"complete": FakeJudge("VERDICT: CORRECT")}, LLMJudgeScorer),
    ],
)
def test_registry_builds(name: str, kwargs: dict, cls: type) -> None:
    scorer = get_scorer(name, **kwargs)
    assert isinstance(scorer, cls) and isinstance(scorer, Scorer) and scorer.name == name


def test_registry_unknown_name_lists_known() -> None:
    with pytest.raises(ValueError) as info:
        get_scorer("nope")
    for known in ("gaia", "exact", "tool_calls", "budget", "llm_judge"):
        assert known in str(info.value)


def test_registry_judge_needs_complete() -> None:
    with pytest.raises(TypeError, match="complete"):
        get_scorer("llm_judge")


def test_scorer_error_is_the_project_error() -> None:
    from harness.errors import HarnessError
    from harness.errors import ScorerError as ProjectScorerError

    assert ScorerError is ProjectScorerError and issubclass(ScorerError, HarnessError)


# --------------------------------------------------------------------------- graded judge
@pytest.mark.parametrize("reply,grade", [
    ("VERDICT: CORRECT", 1.0), ("VERDICT: PARTIALLY CORRECT", 0.5), ("**Verdict:** partly correct", 0.5),
    ("VERDICT: INCORRECT", 0.0), ('{"score": 0.25}', 0.25), ('{"score": 3}', None), ("no idea", None),
])
def test_parse_grade(reply, grade) -> None:
    from harness.scoring.judge import parse_grade

    assert parse_grade(reply) == grade


@pytest.mark.parametrize("threshold,passes", [(0.7, False), (0.5, True)])
def test_judge_partial_grade_passes_only_at_a_low_enough_threshold(threshold, passes) -> None:
    score = LLMJudgeScorer(FakeJudge("Half the items.\nVERDICT: PARTIALLY CORRECT"), threshold=threshold).score(
        "a, b", "a, b, c, d", context=CTX)
    assert score.value == 0.5 and score.correct is passes and "partially correct" in score.explanation
