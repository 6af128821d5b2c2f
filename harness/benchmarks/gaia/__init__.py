"""GAIA: questions with a short text answer and attached files, matched by GAIA's quasi-exact rule."""

from __future__ import annotations

from typing import Any

from harness.benchmark import Benchmark, Export
from harness.benchmarks.gaia import dataset
from harness.benchmarks.gaia.prompt import RULES


def _submission(run: Any, **options: Any) -> tuple[str, list[str]]:
    from harness.benchmarks.gaia.export import render

    return render(run, **options)


BENCHMARK = Benchmark(
    name="gaia", title="GAIA", adapters=(dataset,), order=80, default_scorers=("gaia",), conventions=RULES,
    exports={"gaia": Export(_submission, options=("allow_missing", "allow_partial"))})
