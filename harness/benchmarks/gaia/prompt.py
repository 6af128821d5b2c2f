"""GAIA's answer conventions: the prompt's {conventions} for GAIA's questions (and a dataset of one's own).

They show no answer tag with anything inside it: small models copy whatever an example holds (`42` once, then
the placeholder's brackets, `[247]`: 6 of 9 answers of a real 0.5B model; 0 of 8 with no example), so the tag
is shown empty and the answer described in words."""

from __future__ import annotations

RULES = """\
Answer format (GAIA conventions):
- Put your final answer inside <solution></solution>, and nothing else: no brackets, quotes or words around it.
- A number: digits only, no thousands separators, no units or $ or % unless the question asks for them.
- A string: as few words as possible, no articles, no abbreviations; write digits in plain text unless told otherwise.
- A list: comma-separated, each element following the rules above, in the order the question asks."""
