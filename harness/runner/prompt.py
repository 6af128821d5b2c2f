"""The instruction given to the agent for one instance."""

from __future__ import annotations

from harness.datasets.model import Instance
from harness.sandbox.contract import WORKSPACE

FORMAT_RULES = """\
Answer format (GAIA conventions):
- Put your final answer inside <solution></solution>, e.g. <solution>42</solution>.
- A number: digits only, no thousands separators, no units or $ or % unless the question asks for them.
- A string: as few words as possible, no articles, no abbreviations; write digits in plain text unless told otherwise.
- A list: comma-separated, each element following the rules above, in the order the question asks."""


def instruction(instance: Instance) -> str:
    lines = [instance.question.strip(), ""]
    if instance.files:
        paths = ", ".join(f"{WORKSPACE}/{name}" for name in instance.files)
        lines.append(f"The file(s) for this task are in the sandbox at: {paths}")
        lines.append("")
    lines.append(FORMAT_RULES)
    return "\n".join(lines)
