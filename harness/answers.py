"""Parse the agent's answer from its final message."""

from __future__ import annotations

import re
from typing import Literal

SOLUTION = re.compile(r"<solution>(.*?)</solution>", re.IGNORECASE | re.DOTALL)
Source = Literal["solution_tag", "final_message", "none"]


def extract_answer(final_message: str | None) -> tuple[str | None, Source]:
    """The last <solution>...</solution> (multi-line, any case); else the whole final message."""
    if not final_message or not final_message.strip():
        return None, "none"
    matches = SOLUTION.findall(final_message)
    if matches:
        return matches[-1].strip(), "solution_tag"
    return final_message.strip(), "final_message"
