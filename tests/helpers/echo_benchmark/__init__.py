"""Echo, a benchmark of one's own as a third party writes it (docs/architecture.md, To add a benchmark): a
`.echo` file of words, each an instance asking for the word back, judged by its own `echo` scorer."""

from harness.benchmark import Benchmark
from tests.helpers.echo_benchmark import dataset
from tests.helpers.echo_benchmark.scorer import EchoScorer

BENCHMARK = Benchmark(
    name="echo", title="Echo", adapters=(dataset,), order=5, scorers={"echo": EchoScorer},
    default_scorers=("echo",), judges=("echo",),
    conventions="Answer with the word alone, inside <solution></solution>.")
