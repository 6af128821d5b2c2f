"""MultiHop-RAG's official answer check (qa_evaluate.py of the benchmark's repository).

Rules:
* Both texts are lowercased and split on whitespace (punctuation stays attached to its word).
* The answer is correct iff the two word sets share at least one word.
* The official script first takes ``X`` from ``The answer to the question is "X"`` when the
  answer has that form; so does this scorer (the harness's answer is already the
  ``<solution>`` content, so this rarely applies).

This is kept as the benchmark defines it, so that numbers compare with the paper's: ``Yes`` vs
``yes`` match, ``Yes`` vs ``No`` do not, ``yes.`` vs ``Yes`` do not (punctuation counts), and any
shared word is enough (``Not enough information.`` matches the null queries' ``Insufficient
information.``; a long sentence often matches). Run ``--scorer gaia`` beside it for a strict
check (whole answer equal after removing case, spaces and punctuation).
"""

from __future__ import annotations

import re

from harness.scoring.base import Score, ScoreContext, make_score

__all__ = ["MultiHopRagScorer", "answer_words", "official_extract"]

_OFFICIAL = re.compile(r'The answer to the question is "(.*?)"')


def official_extract(text: str) -> str:
    """X from 'The answer to the question is "X"', else the text unchanged."""
    match = _OFFICIAL.search(text)
    return match.group(1) if match else text


def answer_words(text: str) -> set[str]:
    """The set of lowercased whitespace-separated words of `text`."""
    return set(text.lower().split())


class MultiHopRagScorer:
    """Word-overlap match as in MultiHop-RAG's qa_evaluate.py (see the module docstring)."""

    name = "multihoprag"

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score:
        if answer is None:
            return make_score(self.name, False, "no answer")
        got, want = answer_words(official_extract(answer)), answer_words(target)
        shared = sorted(got & want)
        why = f"shared words: {shared}" if shared else f"no shared word between {sorted(got)} and {sorted(want)}"
        return make_score(self.name, bool(shared), why, shared=shared)
