"""MATH's answer conventions: the prompt's {conventions} for a MATH-500 problem (the answer tag shown empty,
as GAIA's: nothing in it that a model can copy as its answer)."""

from __future__ import annotations

RULES = r"""Answer format (MATH conventions):
- Put your final answer inside <solution></solution> as a LaTeX expression, and nothing else: no $ signs or
  words around it (a fraction as \frac{a}{b}).
- Simplify it: exact values (fractions, radicals, pi) rather than decimals unless the problem asks for them;
  intervals and sets in their usual notation; no units unless the problem asks for them."""
