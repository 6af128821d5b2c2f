"""MATH-500: competition problems with a LaTeX answer, judged by mathematical equivalence."""

from harness.benchmark import Benchmark
from harness.benchmarks.math500 import dataset
from harness.benchmarks.math500.prompt import RULES
from harness.benchmarks.math500.scorer import MathScorer

BENCHMARK = Benchmark(name="math500", title="MATH-500", adapters=(dataset,), order=10, scorers={"math": MathScorer},
                      default_scorers=("math",), conventions=RULES)
