"""Parse the agent's answer from its final message; tell the prompts' example answer copied."""

from __future__ import annotations

import re
from typing import Literal

SOLUTION = re.compile(r"<solution>(.*?)</solution>", re.IGNORECASE | re.DOTALL)
# text_tool_call: the final message was a tool call written as text (models/textcalls.py), not an answer
Source = Literal["solution_tag", "final_message", "text_tool_call", "none"]

# The default prompts' example of the answer tag (runner/prompt.py): a placeholder no task has as its
# answer (a small model copies a real-looking example: `<solution>42</solution>` came back for 8 of 8
# tasks), so an answer equal to it is the example copied, counted by the report (report/build.py).
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


def copies_example(answer: str | None) -> bool:
    """Whether `answer` is EXAMPLE_ANSWER copied: the same words, whatever their case, spacing, brackets
    or quotes around them."""
    if not answer:
        return False
    return " ".join(answer.strip(_EDGES).lower().split()) == EXAMPLE_ANSWER.strip(_EDGES)
