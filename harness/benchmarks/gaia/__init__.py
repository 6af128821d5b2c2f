"""GAIA: questions with a short text answer and attached files, matched by GAIA's quasi-exact rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.benchmark import Benchmark, Export
from harness.benchmarks.gaia import dataset
from harness.benchmarks.gaia.prompt import RULES


def _submission(run: Any, **options: Any) -> tuple[str, list[str]]:
    from harness.benchmarks.gaia.export import render

    return render(run, **options)


def labels(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Its Annotator Metadata's tool families and steps bucket (capabilities.py)."""
    from harness.benchmarks.gaia.capabilities import labels as annotated

    return annotated(metadata) if metadata else {}


def needs_web(metadata: Mapping[str, Any]) -> bool:
    """Its Annotator Metadata names a web tool."""
    from harness.benchmarks.gaia.capabilities import WEB

    return WEB in labels(metadata).get("tool_family", ())


BENCHMARK = Benchmark(
    name="gaia", title="GAIA", adapters=(dataset,), order=80, default_scorers=("gaia",), conventions=RULES,
    labels=labels, needs_web=needs_web, exports={"gaia": Export(_submission, options=("allow_missing",
                                                                                       "allow_partial"))})
