"""Scorers plugged in by `--scorer package.module:attr`, with the built-ins' contract.

Rules:
- `attr` may be a class (instantiated without arguments) or an object with a `name` and a
  `score(answer, target, *, context) -> Score` method: it is used as it is, like a built-in.
- `attr` may be a function `f(answer, target, *, context)`; its name is the scorer's name. It
  may return a Score, a bool (the verdict: value 1 or 0), a number in [0, 1] (a grade: it passes
  at the scorer's threshold, default 0.7), or a dict of Score fields. Anything else, or a
  number outside [0, 1], is the scorer's error (that verdict becomes None, the run goes on).
- A threshold (`--scorer NAME@T`) applies to graded scorers only: those with `graded = True`,
  as the LLM judge and function scorers are.
- The signature is checked when the scorer is loaded, before any container: a function, or a
  `score` method, that cannot be called as (answer, target, *, context) (e.g. the two-argument
  `f(answer, target)`) is an InputError naming the expected signature. A callable whose signature
  Python cannot read (some builtins) is taken as it is; a failure when called is its scorer error.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from harness.errors import InputError
from harness.plugins import load
from harness.scoring.base import Score, ScoreContext, ScorerError, make_score
from harness.scoring.judge import DEFAULT_THRESHOLD

EXPECTED = "(answer, target, *, context)"  # a function's parameters, or a score method's


def as_score(name: str, out: Any, threshold: float) -> Score:
    """A function scorer's return value as a Score (rules above)."""
    if isinstance(out, Score):
        return out if out.scorer == name else out.model_copy(update={"scorer": name})
    if isinstance(out, bool):
        return make_score(name, out)
    if isinstance(out, (int, float)):
        if not 0 <= out <= 1:
            raise ScorerError(f"{name} returned {out}, outside [0, 1]")
        return Score(scorer=name, correct=out >= threshold, value=float(out),
                     explanation=f"grade {out:g}, passes at {threshold:g}")
    if isinstance(out, dict):
        return Score.model_validate({"scorer": name, **out})
    raise ScorerError(f"{name} returned {type(out).__name__}; expected Score, bool, a number in [0, 1] or dict")


class FunctionScorer:
    """A plain function as a scorer."""

    graded = True

    def __init__(self, name: str, fn: Callable[..., Any], threshold: float = DEFAULT_THRESHOLD) -> None:
        self.name, self.fn, self.threshold = name, fn, threshold

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score:
        return as_score(self.name, self.fn(answer, target, context=context), self.threshold)


def _check_signature(target: str, fn: Callable[..., Any], what: str) -> None:
    """InputError unless `fn` can be called as fn(answer, target, context=...)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no readable signature (a builtin): called as it is
        return
    try:
        signature.bind("answer", "target", context=None)
    except TypeError as exc:
        raise InputError(f"--scorer {target}: a scorer takes {EXPECTED}; {what}{signature} does not ({exc})") from None


def load_scorer(target: str):
    """The scorer `module:attr` names (InputError naming --scorer when it is not one, or when its
    signature is not (answer, target, *, context))."""
    obj = load(target, "--scorer")
    if isinstance(obj, type):
        try:
            obj = obj()
        except TypeError as exc:
            raise InputError(f"--scorer {target}: a scorer class must take no arguments ({exc})") from None
    if callable(getattr(obj, "score", None)) and isinstance(getattr(obj, "name", None), str):
        _check_signature(target, obj.score, "score")
        return obj
    if callable(obj):
        _check_signature(target, obj, getattr(obj, "__name__", "the scorer"))
        return FunctionScorer(target.partition(":")[2], obj)
    raise InputError(f"--scorer {target}: not a scorer (a class or object with name and score(), or a function)")
