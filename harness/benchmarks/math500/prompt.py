"""MATH's answer conventions: the prompt's {conventions} for a MATH-500 problem."""

from __future__ import annotations

from harness.answers import EXAMPLE_ANSWER

EXAMPLE = f"<solution>{EXAMPLE_ANSWER}</solution>"  # a placeholder no task has as its answer (answers.py)
RULES = f"""Answer format (MATH conventions):
- Put your final answer inside <solution></solution> as a LaTeX expression: {EXAMPLE},
  the expression itself in place of the bracketed placeholder (a fraction as \\frac{{a}}{{b}}).
- Simplify it: exact values (fractions, radicals, pi) rather than decimals unless the problem asks for them;
  intervals and sets in their usual notation; no units unless the problem asks for them."""
