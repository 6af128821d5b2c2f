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

# Benchmarks whose answers follow conventions of their own (the dataset adapter sets metadata["benchmark"]).
BENCHMARK_RULES = {
    "math500": """Answer format (MATH conventions):
- Put your final answer inside <solution></solution> as a LaTeX expression, e.g. <solution>\\frac{3}{4}</solution>.
- Simplify it: exact values (fractions, radicals, pi) rather than decimals unless the problem asks for them;
  intervals and sets in their usual notation; no units unless the problem asks for them.""",
    "multihoprag": """\
Answer format (MultiHop-RAG conventions):
- Search the news corpus with search_corpus; the answer is in the articles, usually across two or more.
- Put your final answer inside <solution></solution>, as short as possible: Yes or No, a name, a date.
- If the articles do not say, answer <solution>Insufficient information.</solution>""",
}


def instruction(instance: Instance) -> str:
    lines = [instance.question.strip(), ""]
    if instance.files:
        paths = ", ".join(f"{WORKSPACE}/{name}" for name in instance.files)
        lines.append(f"The file(s) for this task are in the sandbox at: {paths}")
        lines.append("")
    lines.append(BENCHMARK_RULES.get(str(instance.metadata.get("benchmark")), FORMAT_RULES))
    return "\n".join(lines)
