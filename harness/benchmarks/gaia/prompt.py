"""GAIA's answer conventions: the prompt's {conventions} for GAIA's questions (and a dataset of one's own)."""

from __future__ import annotations

from harness.answers import EXAMPLE_ANSWER

EXAMPLE = f"<solution>{EXAMPLE_ANSWER}</solution>"  # a placeholder no task has as its answer (answers.py)
RULES = f"""\
Answer format (GAIA conventions):
- Put your final answer inside <solution></solution>: {EXAMPLE}, the answer itself
  in place of the bracketed placeholder.
- A number: digits only, no thousands separators, no units or $ or % unless the question asks for them.
- A string: as few words as possible, no articles, no abbreviations; write digits in plain text unless told otherwise.
- A list: comma-separated, each element following the rules above, in the order the question asks."""
