"""Parse the agent's answer from its final message; tell the prompts' example answer copied."""

from __future__ import annotations

import re
from typing import Literal

SOLUTION = re.compile(r"<solution>(.*?)</solution>", re.IGNORECASE | re.DOTALL)
# text_tool_call: the final message was a tool call written as text (models/textcalls.py), not an answer
Source = Literal["solution_tag", "final_message", "text_tool_call", "none"]

# The placeholder the default prompts showed in the answer tag until issue 41 (a small model copies a
# real-looking example, `<solution>42</solution>` 8 of 8 times, and then the placeholder's brackets, `[247]`):
# the prompts now show the tag empty (benchmarks/gaia/prompt.py); an answer equal to it, in a run of
# then or under a template of one's own, is still counted by the report (report/build.py), as is an
# answer wrapped in brackets (`bracketed`).
EXAMPLE_ANSWER = "[your final answer]"
_EDGES = " \t\r\n[](){}<>\"'`*_.:;,!"


def extract_answer(final_message: str | None) -> tuple[str | None, Source]:
    """The last <solution>...</solution> (multi-line, any case); else the whole final message."""
    if not final_message or not final_message.strip():
        return None, "none"
    matches = SOLUTION.findall(final_message)
    if matches:
        return matches[-1].strip(), "solution_tag"
    return final_message.strip(), "final_message"


def bracketed(answer: str | None) -> bool:
    """Whether `answer` is wrapped in square brackets (`[247]`, `[13, 14, 15]`): the shape of the prompts' old
    placeholder copied around a value, which GAIA's scorer reads as no number (a real 0.5B model: 6 of 9)."""
    text = (answer or "").strip()
    return len(text) > 2 and text[0] == "[" and text[-1] == "]"


def copies_example(answer: str | None) -> bool:
    """Whether `answer` is EXAMPLE_ANSWER copied: the same words, whatever their case, spacing, brackets
    or quotes around them."""
    if not answer:
        return False
    return " ".join(answer.strip(_EDGES).lower().split()) == EXAMPLE_ANSWER.strip(_EDGES)
