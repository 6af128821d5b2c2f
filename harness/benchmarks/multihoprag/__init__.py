"""MultiHop-RAG: questions over a news corpus the agent searches (the corpus tool family), short answers."""

from harness.benchmark import Benchmark
from harness.benchmarks.multihoprag import dataset
from harness.benchmarks.multihoprag.prompt import RULES
from harness.benchmarks.multihoprag.scorer import MultiHopRagScorer

BENCHMARK = Benchmark(name="multihoprag", title="MultiHop-RAG", adapters=(dataset,), order=20,
                      scorers={"multihoprag": MultiHopRagScorer}, default_scorers=("multihoprag",), conventions=RULES)
