"""The `math` scorer (harness/benchmarks/math500/scorer.py): its rules, as a table of equivalent and different pairs."""

from __future__ import annotations

import threading
import time

import pytest

from harness.benchmarks.math500 import scorer as math_scoring
from harness.benchmarks.math500.scorer import MathScorer, extract_answer, is_prose, text_key
from harness.scoring import get_scorer
from harness.scoring.base import ScoreContext

CTX = ScoreContext()

# (target, answer, verdict): every equivalence class of the module docstring, both ways.
TABLE = [
    # boxed and extraction
    ("5", "\\boxed{5}", True),
    ("5", "The answer is $\\boxed{5}$.", True),
    ("8", "first \\boxed{4}, then \\boxed{8}", True),       # the last box counts
    ("4", "first \\boxed{4}, then \\boxed{8}", False),
    ("\\frac{7}{2}", "The answer is 7/2", True),               # prose: math-verify's own extraction
    ("\\boxed{3}", "3", True),                                 # a boxed target too
    # fractions and decimals
    ("\\frac{1}{2}", "0.5", True),
    ("\\frac12", "\\dfrac{1}{2}", True),
    ("\\frac{1}{2}", "\\frac{2}{4}", True),
    ("-\\frac{1}{2}", "-0.5", True),
    ("\\frac{3}{4}", "0.75", True),
    ("\\frac{1}{3}", "0.333", False),                          # 6-decimal rounding, not 3
    ("6", "6.0", True),
    ("1000", "1,000", True),
    # percentages (decision: both 0.5 and 50 equal 50\%)
    ("50\\%", "0.5", True),
    ("50\\%", "50", True),
    ("50\\%", "5", False),
    # units and decorations
    ("10\\text{ cm}", "10", True),
    ("10", "10\\text{ cm}", True),
    ("10\\text{ cm}", "11", False),
    ("30^\\circ", "30", True),
    ("\\$18.50", "18.5", True),
    # intervals
    ("[1,2)", "[1,2]", False),
    ("[1,2)", "[1, 2)", True),
    ("(-\\infty, 3]", "(-\\infty,3]", True),
    ("(-\\infty, 3]", "(-\\infty,3)", False),
    # sets and lists
    ("\\{1,2\\}", "\\{2,1\\}", True),
    ("\\{1,2\\}", "\\{1,3\\}", False),
    ("-2, 3", "3, -2", True),
    # expressions
    ("x^2+2x+1", "(x+1)^2", True),
    ("x^2+2x+1", "(x+2)^2", False),
    ("2\\sqrt{3}", "\\sqrt{12}", True),
    ("\\frac{\\sqrt{2}}{2}", "\\sqrt2/2", True),
    ("4\\pi", "\\pi \\cdot 4", True),
    ("\\pi", "3.14159", False),
    # equations, tuples, matrices, text
    ("3", "x=3", True),
    ("(2,-1)", "(-1,2)", False),
    ("\\begin{pmatrix} 2 \\\\ 3 \\end{pmatrix}", "\\begin{pmatrix}2\\\\3\\end{pmatrix}", True),
    ("\\text{(C)}", "C", True),
    ("\\text{Evelyn}", "evelyn", True),
    # plain difference and no mathematics at all
    ("3", "4", False),
    ("55", "I could not finish this one.", False),
]


@pytest.mark.parametrize(("target", "answer", "verdict"), TABLE)
def test_table(target, answer, verdict):
    score = MathScorer().score(answer, target, context=CTX)
    assert score.correct is verdict, score.explanation
    assert score.value == (1.0 if verdict else 0.0)


def test_table_covers_enough_pairs_both_ways():
    assert len(TABLE) >= 30
    assert sum(v for *_, v in TABLE) >= 15 and sum(not v for *_, v in TABLE) >= 10


def test_extraction_rules():
    assert extract_answer("so $\\boxed{\\frac{1}{2}}$ and \\boxed{x^{2}}") == "x^{2}"  # nested braces kept
    assert extract_answer("  $0.5$ ") == "0.5"
    assert extract_answer("\\boxed{unclosed") == "\\boxed{unclosed"
    assert is_prose("The answer is 7") and not is_prose("10\\text{ square meters}")
    assert not is_prose("\\frac{\\sqrt{2}}{2}")
    assert text_key("\\text{ Evelyn }$") == "evelyn"


@pytest.mark.parametrize(("first", "second"), [
    ("0.5", "\\frac{1}{2}"), ("\\frac12", "\\boxed{\\dfrac{2}{4}}"), ("50\\%", "0.5"), ("\\sqrt{12}", "2\\sqrt3"),
    ("(x+1)^2", "x^2+2x+1"), ("\\{2,1\\}", "\\{1, 2\\}"), ("x=3", "3"), ("6.0", "6"), ("10\\text{ cm}", "10"),
    ("\\text{Evelyn}", "Evelyn"), ("[1, 2)", "[1,2)"),
])
def test_normalize_gives_equivalent_answers_one_key(first, second):
    scorer = MathScorer()
    assert scorer.normalize(first) == scorer.normalize(second)


@pytest.mark.parametrize(("first", "second"), [
    ("0.5", "0.333"), ("[1,2)", "[1,2]"), ("\\{1,2\\}", "\\{1,3\\}"), ("(x+1)^2", "(x+2)^2"), ("3", "4"),
    ("\\frac13", "0.333"),
])
def test_normalize_keeps_different_answers_apart(first, second):
    scorer = MathScorer()
    assert scorer.normalize(first) != scorer.normalize(second)


def test_registered_and_scores_from_a_worker_thread():
    """math-verify's own timeouts need SIGALRM (main thread only); the harness scores in threads."""
    scorer = get_scorer("math")
    results: dict[str, object] = {}

    def work():
        results["score"] = scorer.score("0.5", "\\frac{1}{2}", context=CTX)
        results["wrong"] = scorer.score("[1,2]", "[1,2)", context=CTX)
        results["key"] = scorer.normalize("\\frac{2}{4}")

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(60)
    assert not worker.is_alive()
    assert results["score"].correct is True, results["score"].explanation
    assert results["wrong"].correct is False
    assert results["key"] == "1/2"


def test_a_computation_past_the_timeout_gives_no_verdict_instead_of_hanging(monkeypatch):
    def slow(target, answer):
        time.sleep(5)
        return True

    monkeypatch.setattr(math_scoring, "_equivalent", slow)
    started = time.monotonic()
    score = MathScorer(timeout=0.5).score("0.5", "\\frac{1}{3}", context=CTX)
    assert time.monotonic() - started < 3
    assert score.correct is None and "timed out" in score.explanation
    assert MathScorer(timeout=0.5).normalize("\\text{ Slow }") == "slow"  # normalize falls back to the text key


def test_no_answer_is_wrong():
    assert MathScorer().score(None, "1", context=CTX).correct is False
