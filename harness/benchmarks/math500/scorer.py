"""MATH-style answer checking with math-verify (symbolic equivalence, not string equality).

Rules:
* Extraction (answer and target alike): the content of the last ``\\boxed{...}`` (or ``\\fbox``)
  if there is one; otherwise the whole text (the ``<solution>`` content or final message),
  surrounding ``$`` removed. Text that reads as prose (two words in a row, outside ``\\text{}``)
  is handed to math-verify's own extraction ("the answer is 0.5" gives 0.5); anything else is
  parsed as one LaTeX expression, as if boxed.
* Equivalence: math-verify's ``verify(target, answer)`` (target first: it is asymmetric), with
  its defaults: numbers equal after rounding to 6 decimals (``\\frac12`` = 0.5 = ``1/2``, but
  ``\\frac13`` != 0.333), expressions equal when sympy finds them equal (``x^2+2x+1`` =
  ``(x+1)^2``, ``2\\sqrt3`` = ``\\sqrt{12}``), sets unordered (``\\{1,2\\}`` = ``\\{2,1\\}``),
  intervals with their bounds' openness (``[1,2)`` != ``[1,2]``), ``x=3`` = 3, units and
  ``\\text{}`` decorations (cm, dollars, ``^\\circ``, ``\\$``) dropped.
* Percentages: ``50\\%`` equals both 0.5 and 50 (math-verify's rule, kept: MATH's own graders
  strip ``\\%``, and 0.5 is the same quantity).
* When either side does not parse as mathematics, the two texts compare equal after
  normalising (``\\text{}``/``\\mathrm{}`` unwrapped, ``$``, spaces and case dropped); a text
  match is accepted in every case.
* Time: math-verify's own timeouts use SIGALRM, which works only in the main thread, and the
  harness scores in worker threads. So its timeouts are disabled and each parse/verify runs in
  a daemon thread that is waited for at most ``timeout`` seconds; past that the verdict is None
  ("timed out"), never a hang. A computation that never ends keeps its thread until it does.

``normalize(answer)`` gives a canonical key (the majority vote over epochs groups answers by it):
numbers as exact rationals or simplified surds (0.5, ``\\frac12``, ``50\\%`` -> ``1/2``),
expressions expanded, sets sorted, ``x=3`` as its right side; words (a name, ``\\text{Evelyn}``)
and what does not parse lowercased without spaces.
Equivalent answers share a key as far as sympy's canonical forms allow (``50\\%`` and 50 do not).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from harness.scoring.base import Score, ScoreContext, make_score

__all__ = ["MathScorer", "canonical_key", "extract_answer", "is_prose", "text_key"]

T = TypeVar("T")
DEFAULT_TIMEOUT = 10.0
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm|mbox|textrm)\s*\{([^{}]*)\}")
_COMMAND = re.compile(r"\\[A-Za-z]+")
_PROSE = re.compile(r"[A-Za-z]{2,}[\s,.:;]+[A-Za-z]{2,}")
_WORDS = re.compile(r"^[\sA-Za-z.,'()-]*[A-Za-z]{2}[\sA-Za-z.,'()-]*$")
# math-verify warns on every call that its timeout is disabled: we time it ourselves.
logging.getLogger("math_verify").setLevel(logging.ERROR)


def _boxed_contents(text: str) -> list[str]:
    """The contents of every \\boxed{...} in `text`, braces matched; an unclosed one is dropped."""
    found = []
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                found.append(text[start:i])
                break
    return found


def extract_answer(text: str) -> str:
    """The last boxed content, else the whole text; surrounding whitespace and `$` removed."""
    boxed = _boxed_contents(text)
    chosen = boxed[-1] if boxed else text
    return chosen.strip().strip("$").strip()


def is_prose(text: str) -> bool:
    """True when `text` has two words in a row outside \\text{} (a sentence, not an expression)."""
    bare = _COMMAND.sub(" ", _TEXT_CMD.sub(" ", text))
    return bool(_PROSE.search(bare))


def text_key(text: str) -> str:
    """The text fallback: \\text{} unwrapped, `$`, `\\!`, spaces and case dropped."""
    unwrapped = _TEXT_CMD.sub(r"\1", text).replace("\\!", "").replace("$", "")
    return re.sub(r"\s+", "", unwrapped).lower()


def _parse(extracted: str) -> list[Any]:
    """math-verify's parse of an extracted answer, without its signal-based timeout."""
    from math_verify import parse

    source = extracted if is_prose(extracted) else "\\boxed{" + extracted + "}"
    return parse(source, parsing_timeout=None)


def _equivalent(target: list[Any], answer: list[Any]) -> bool:
    from math_verify import verify

    return verify(target, answer, timeout_seconds=None)


def canonical_key(parsed: list[Any], extracted: str) -> str:
    """A canonical string for a parsed answer (see the module docstring); text_key if unparsed."""
    if not parsed:
        return text_key(extracted)
    return _canonical(parsed[0])


def _canonical(expr: Any) -> str:
    import sympy

    if isinstance(expr, str):
        return text_key(expr)
    if isinstance(expr, sympy.MatrixBase):
        return "matrix" + str([[_canonical(x) for x in row] for row in expr.tolist()])
    if isinstance(expr, sympy.Eq) and isinstance(expr.lhs, sympy.Symbol):
        return _canonical(expr.rhs)
    if isinstance(expr, sympy.FiniteSet) or isinstance(expr, (set, frozenset)):
        return "{" + ",".join(sorted(_canonical(x) for x in expr)) + "}"
    if isinstance(expr, (tuple, sympy.Tuple)):
        return "(" + ",".join(_canonical(x) for x in expr) + ")"
    if isinstance(expr, sympy.Interval):
        left, right = "(" if expr.left_open else "[", ")" if expr.right_open else "]"
        return f"{left}{_canonical(expr.start)},{_canonical(expr.end)}{right}"
    if isinstance(expr, sympy.Basic) and expr.is_number:
        value = sympy.nsimplify(expr, rational=True) if expr.has(sympy.Float) else sympy.simplify(expr)
        return str(value).replace(" ", "")
    if isinstance(expr, sympy.Expr):
        return str(sympy.expand(sympy.simplify(expr))).replace(" ", "")
    return str(expr).replace(" ", "")


def bounded(fn: Callable[..., T], *args: Any, timeout: float) -> tuple[bool, T | None]:
    """(finished, result) of fn(*args) run in a daemon thread waited on for at most `timeout` s.

    Works from any thread (no signals). An exception inside is re-raised here.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=target, name="math-verify", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return False, None
    if "error" in box:
        raise box["error"]
    return True, box["value"]


def _judge(answer: str, target: str) -> tuple[bool, str, dict[str, Any]]:
    """(verdict, explanation, details) of the rules above, without a time bound."""
    got, want = extract_answer(answer), extract_answer(target)
    parsed_answer, parsed_target = _parse(got), _parse(want)
    details = {"extracted": [got, want], "parsed": [_shown(parsed_answer), _shown(parsed_target)]}
    if text_key(got) == text_key(want) and text_key(got):
        return True, f"text match: {got!r}", details
    if not parsed_answer or not parsed_target:
        side = "answer" if not parsed_answer else "target"
        return False, f"{side} does not parse as mathematics and the texts differ: {got!r} vs {want!r}", details
    ok = _equivalent(parsed_target, parsed_answer)
    return ok, f"math-verify: {got!r} {'equals' if ok else 'differs from'} {want!r}", details


def _shown(parsed: list[Any]) -> str | None:
    return str(parsed[0]) if parsed else None


def _key(answer: str) -> str:
    extracted = extract_answer(answer)
    if _WORDS.match(_TEXT_CMD.sub(r"\1", extracted)):  # a name: sympy would read a product of letters
        return text_key(extracted)
    return canonical_key(_parse(extracted), extracted)


class MathScorer:
    """Symbolic equivalence of MATH-style answers (math-verify); rules in the module docstring."""

    name = "math"

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout

    def score(self, answer: str | None, target: str, *, context: ScoreContext) -> Score:
        if answer is None:
            return make_score(self.name, False, "no answer")
        finished, result = bounded(_judge, answer, target, timeout=self.timeout)
        if not finished or result is None:
            return make_score(self.name, None, f"math-verify timed out after {self.timeout:g}s",
                              extracted=[extract_answer(answer), extract_answer(target)])
        ok, why, details = result
        return make_score(self.name, ok, why, **details)

    def normalize(self, answer: str) -> str:
        """A canonical key: equivalent answers get the same key as far as feasible (see above).

        Never raises and never hangs: past the timeout, or on a parser error, the text key.
        """
        try:
            finished, key = bounded(_key, answer, timeout=self.timeout)
        except Exception:  # noqa: BLE001 - a key is always returned
            finished, key = False, None
        return key if finished and key is not None else text_key(extract_answer(answer))
