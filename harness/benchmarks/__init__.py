"""The benchmarks, one package each, each exposing one registered `Benchmark` (harness/benchmark.py) as
`BENCHMARK`: gaia, math500, multihoprag, gaia2, harbor, and custom (a dataset of one's own). Generic code never
imports them: the registry loads them (pyproject.toml's `harness.benchmarks` entry points)."""
