"""Strict vs lenient: where the GAIA scorer and the LLM judge disagree on the same answer.

The GAIA scorer is strict (its normalised strings or numbers must match: "$1,234" for 1234 is
wrong), the judge lenient (it reads the answer as a person would). When a run has both (each row's
``scores`` holds every scorer's verdict), `disagreements(rows)` lists, over the rows given (the
selected ids' latest, every epoch), the instances where both reached a verdict and the verdicts
differ:
* ``lenient_only``: the judge passed it, GAIA did not (right, but badly formatted for GAIA);
* ``strict_only``: GAIA passed it, the judge did not (a lucky match, or a judge too strict);
with ``compared`` (rows both judged) and, per instance, the answer, the target and both
explanations. An id appears once per disagreeing epoch ("ID #eN" with epochs). None when no row
has both scorers' verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.results.model import ResultRow

STRICT, LENIENT = "gaia", "llm_judge"


def _verdict(row: ResultRow, name: str) -> bool | None:
    score = row.scores.get(name)
    return score.get("correct") if score else None


def disagreements(rows: Sequence[ResultRow], *, epochs: int = 1) -> dict[str, Any] | None:
    """The disagreements of the module docstring, None without rows judged by both."""
    compared = 0
    out: dict[str, list[dict[str, Any]]] = {"lenient_only": [], "strict_only": []}
    for row in rows:
        strict, lenient = _verdict(row, STRICT), _verdict(row, LENIENT)
        if row.status == "error" or strict is None or lenient is None:
            continue
        compared += 1
        if strict == lenient:
            continue
        out["lenient_only" if lenient else "strict_only"].append({
            "instance_id": row.instance_id if epochs == 1 else f"{row.instance_id} #e{row.epoch}",
            "answer": row.answer, "target": row.target,
            "strict": (row.scores[STRICT].get("explanation") or "")[:300],
            "lenient": (row.scores[LENIENT].get("explanation") or "")[:300]})
    return {"compared": compared, **out} if compared else None
