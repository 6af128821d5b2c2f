"""GAIA answer matching with the same verdicts as the official leaderboard scorer.

Three modes, chosen by the ground truth only:
* number: ``float(ground_truth)`` succeeds. The answer loses every ``$``, ``%`` and
  ``,`` and must then parse (``float`` tolerates surrounding whitespace only) to an
  equal float. An unparsable answer becomes ``inf``, exactly like the official code.
* list: the truth contains ``,`` or ``;``. Both sides are split on ``[,;]``, the
  lengths must agree, numeric truth items compare as numbers, others compare as
  strings with whitespace removed and lowercased, punctuation kept.
* string: whitespace removed, lowercased, ASCII punctuation removed, then equality.
A missing answer (None) is compared as the string ``"None"``.
"""

from __future__ import annotations

import math
import re
import string
from typing import Literal

from .base import Score, ScoreContext, make_score

__all__ = ["GaiaScorer", "gaia_match", "match_kind", "normalize_number", "normalize_text"]

MatchKind = Literal["number", "list", "string"]

_LIST_SEPARATORS = re.compile(r"[,;]")
_WHITESPACE = re.compile(r"\s")
_DROP_PUNCT = str.maketrans("", "", string.punctuation)
_DROP_NUMBER_NOISE = str.maketrans("", "", "$%,")


def _parses_as_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def normalize_number(text: str) -> float:
    """Float value of ``text`` without ``$``, ``%`` and ``,``; ``inf`` if unparsable."""
    try:
        return float(text.translate(_DROP_NUMBER_NOISE))
    except ValueError:
        return float("inf")


def normalize_text(text: str, *, remove_punct: bool = True) -> str:
    """Drop all whitespace, lowercase, optionally drop ``string.punctuation``."""
    squashed = _WHITESPACE.sub("", text).lower()
    return squashed.translate(_DROP_PUNCT) if remove_punct else squashed


def match_kind(ground_truth: str) -> MatchKind:
    """Which comparison the official scorer applies for this ground truth."""
    if _parses_as_float(ground_truth):
        return "number"
    if _LIST_SEPARATORS.search(ground_truth):
        return "list"
    return "string"


def _item_matches(answer_item: str, truth_item: str) -> bool:
    if _parses_as_float(truth_item):
        return normalize_number(answer_item) == float(truth_item)
    return normalize_text(answer_item, remove_punct=False) == normalize_text(
        truth_item, remove_punct=False
    )


def _compare(model_answer: str | None, ground_truth: str) -> tuple[bool, str, dict]:
    """(verdict, explanation, details): the details hold the two normalised values it compared."""
    answer = "None" if model_answer is None else model_answer
    kind = match_kind(ground_truth)
    if kind == "number":
        got, want = normalize_number(answer), float(ground_truth)
        said = f"{got:g}" if got != float("inf") else f"{answer.strip()[:60]!r} is no number"  # inf: unreadable
        return got == want, f"number: {said} vs {want:g}", {"compared": [_json(got), _json(want)]}
    if kind == "list":
        answer_items = _LIST_SEPARATORS.split(answer)
        truth_items = _LIST_SEPARATORS.split(ground_truth)
        compared = [[_item_value(a, t) for a, t in zip(answer_items, truth_items, strict=False)],  # may differ
                    [_item_value(t, t) for t in truth_items]]
        if len(answer_items) != len(truth_items):
            return False, f"list: {len(answer_items)} items vs {len(truth_items)} expected", {
                "compared": [[_item_value(a, "") for a in answer_items], compared[1]]}
        bad = [i for i, pair in enumerate(zip(answer_items, truth_items, strict=True)) if not _item_matches(*pair)]
        why = f"list: mismatched items at {bad}" if bad else "list: all items match"
        return not bad, f"{why}: {compared[0]!r} vs {compared[1]!r}", {"compared": compared}
    got_text, want_text = normalize_text(answer), normalize_text(ground_truth)
    ok = got_text == want_text
    return (ok, f"string: normalized {got_text!r} vs {want_text!r} " + ("match" if ok else "differ"),
            {"compared": [got_text, want_text]})


def _json(x: float) -> float | str:
    """A float JSON can hold: inf (an unparsable answer) and nan as their names."""
    return x if math.isfinite(x) else repr(x)


def _item_value(item: str, truth_item: str) -> float | str:
    """One list item as compared: a number when its truth item is one, else the squashed text."""
    if _parses_as_float(truth_item):
        return _json(normalize_number(item))
    return normalize_text(item, remove_punct=False)


def gaia_match(model_answer: str | None, ground_truth: str) -> bool:
    """True iff the official GAIA scorer would accept ``model_answer``."""
    return _compare(model_answer, ground_truth)[0]


class GaiaScorer:
    """Quasi-exact match as on the GAIA leaderboard."""

    name = "gaia"

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score:
        ok, why, details = _compare(answer, target)
        return make_score(self.name, ok, why, kind=match_kind(target), **details)
