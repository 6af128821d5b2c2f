"""A dataset of one's own: a JSONL, CSV or parquet file of questions and answers, judged by GAIA's quasi-exact
match unless --scorer says otherwise, its agent prompted with GAIA's answer conventions (and a row with GAIA's
Annotator Metadata labelled as GAIA's)."""

from harness.benchmark import CUSTOM, Benchmark
from harness.benchmarks.custom import dataset
from harness.benchmarks.gaia import labels, needs_web
from harness.benchmarks.gaia.prompt import RULES

BENCHMARK = Benchmark(name=CUSTOM, title="a dataset of one's own", adapters=(dataset,), order=90,
                      default_scorers=("gaia",), conventions=RULES, labels=labels, needs_web=needs_web)
