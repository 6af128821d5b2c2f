"""Reducers: one verdict per instance from its K epochs (`--epochs K --reducer NAME`).

Each instance ran K times (epochs 1..K, each in a fresh sandbox). An epoch that errored or has
no row counts as not correct, with no answer. The reducers (`parse_reducer` reads their names):
* ``mean``: the mean of the primary scorer's Score.value over the K epochs (graded scorers give
  0.5 where they do). Passed when the mean is at least 0.5.
* ``majority``: the modal answer. Answers are grouped by a key (the primary scorer's
  ``normalize(answer)`` when it has one, e.g. the math scorer's canonical form; else GAIA's
  text normalisation: whitespace and punctuation dropped, lower case). Epochs without an answer
  do not vote. A tie goes to the tied key that appeared first in epoch order, and is reported.
  The value is 1 when the epoch that gave the winning key's first answer was correct.
* ``pass@k`` (1 <= k <= K): the unbiased estimator 1 - C(K-c, k) / C(K, k) of the chance that
  at least one of k epochs drawn without replacement is correct (c correct of K). Passed when c >= 1.
* ``pass^k`` (1 <= k <= K): tau-bench's reliability, the unbiased estimator C(c, k) / C(K, k) of the
  chance that all of k epochs drawn without replacement are correct. Passed when c >= k (the
  estimate is above 0); with k = K, only when every epoch is correct.
* ``at_least_n`` (1 <= n <= K): 1 when at least n epochs are correct, else 0.
Agreement: the share of an instance's epoch pairs whose answers have the same key (a missing
answer is a key of its own), and whether all K agree.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.errors import InputError
from harness.scoring.gaia import normalize_text

NO_ANSWER = "\x00none"
_PASS_AT = re.compile(r"^pass@(\d+)$")
_PASS_HAT = re.compile(r"^pass\^(\d+)$")
_AT_LEAST = re.compile(r"^at_least_(\d+)$")


@dataclass(frozen=True)
class Epoch:
    """What a reducer needs of one epoch's row: its answer, verdict and score value."""

    answer: str | None
    correct: bool
    value: float


@dataclass(frozen=True)
class Reduced:
    value: float  # in [0, 1]
    passed: bool
    answer: str | None = None  # majority: the winning answer (as first given)
    tie: bool = False  # majority: the modal count was shared


def parse_reducer(name: str, epochs: int) -> str:
    """The reducer's canonical name; InputError naming --reducer for anything else."""
    name = name.strip().lower()
    if name in ("mean", "majority"):
        return name
    match = _PASS_AT.match(name) or _PASS_HAT.match(name) or _AT_LEAST.match(name)
    if match:
        k = int(match.group(1))
        if not 1 <= k <= epochs:
            raise InputError(f"--reducer {name}: needs 1 <= {k} <= --epochs ({epochs})")
        return name
    raise InputError(f"--reducer {name!r}: expected mean, majority, pass@K, pass^K or at_least_N")


def answer_key(answer: str | None, normalize: Callable[[str], str] | None = None) -> str:
    if answer is None:
        return NO_ANSWER
    try:
        return (normalize or normalize_text)(answer)
    except Exception:  # noqa: BLE001 - a scorer's normaliser that fails falls back to the text's
        return normalize_text(answer)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k from n samples with c correct: the chance that k drawn without replacement all pass
    (0 with fewer than k samples)."""
    return math.comb(c, k) / math.comb(n, k) if k <= n else 0.0


def majority(epochs: Sequence[Epoch], normalize: Callable[[str], str] | None = None) -> Reduced:
    keys = [answer_key(e.answer, normalize) for e in epochs]
    votes = Counter(k for k in keys if k != NO_ANSWER)
    if not votes:
        return Reduced(0.0, False)
    top = max(votes.values())
    winner = next(k for k in keys if votes.get(k) == top)  # first in epoch order among the tied
    first = epochs[keys.index(winner)]
    tie = sum(1 for count in votes.values() if count == top) > 1
    return Reduced(1.0 if first.correct else 0.0, first.correct, first.answer, tie)


def reduce(name: str, epochs: Sequence[Epoch], normalize: Callable[[str], str] | None = None) -> Reduced:
    """Apply a reducer (a name parse_reducer accepted) to one instance's epochs, in epoch order."""
    n, c = len(epochs), sum(e.correct for e in epochs)
    if name == "mean":
        value = sum(e.value for e in epochs) / n if n else 0.0
        return Reduced(value, value >= 0.5)
    if name == "majority":
        return majority(epochs, normalize)
    match = _PASS_AT.match(name)
    if match:
        return Reduced(pass_at_k(n, c, int(match.group(1))), c >= 1)
    match = _PASS_HAT.match(name)
    if match:
        k = int(match.group(1))
        return Reduced(pass_hat_k(n, c, k), c >= k)
    match = _AT_LEAST.match(name)
    if match:
        ok = c >= int(match.group(1))
        return Reduced(1.0 if ok else 0.0, ok)
    raise ValueError(f"unknown reducer {name!r}")


def agreement(epochs: Sequence[Epoch], normalize: Callable[[str], str] | None = None) -> tuple[float, bool]:
    """(share of epoch pairs with the same answer key, whether all epochs agree)."""
    keys = [answer_key(e.answer, normalize) for e in epochs]
    pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:]]
    if not pairs:
        return 1.0, True
    same = sum(a == b for a, b in pairs)
    return same / len(pairs), len(set(keys)) == 1
