"""A benchmark of one's own is one package (tests/helpers/echo_benchmark/): registered directly, as a test does, or
through the `harness.benchmarks` entry point of an installed distribution, as a third party does; the harness then
reads its datasets, prompts its agents with its conventions and judges them by its scorer, without a flag."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.agents.contract import Limits
from harness.benchmark import get, register, unregister
from harness.config import Scoring, TomlConfig
from harness.datasets import load_dataset
from harness.errors import InputError
from harness.runner.prompt import instruction
from harness.runner.scorers import build_scorers, judging
from harness.scoring.apply import context_for, score_row
from tests.helpers.echo_benchmark import BENCHMARK

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def echo():
    register(BENCHMARK)
    yield BENCHMARK
    unregister(BENCHMARK.name)


def test_a_registered_benchmark_reads_prompts_and_judges_its_own(echo, tmp_path):
    data = tmp_path / "words.echo"
    data.write_text("hello world\n")
    (first, second) = load_dataset(data).instances
    assert (first.benchmark, first.answer, second.answer) == ("echo", "hello", "world")
    assert instruction(first).endswith(echo.conventions)
    scoring = judging(Scoring.from_flags(None, None, TomlConfig(None)), {"echo"})
    assert scoring.names == ("echo",)  # its own scorer, with no --scorer
    context = context_for(tool_calls=[], total_tokens=0, steps=1, limits=Limits(), question=first.question)
    scores, correct = score_row(" hello ", "hello", build_scorers(scoring), context)
    assert correct is True and scores["echo"]["correct"] is True
    with pytest.raises(InputError, match=r"--scorer gaia cannot judge Echo \(echo\).*can: budget, echo, tool_calls"):
        judging(Scoring.from_flags(["gaia"], None, TomlConfig(None)), {"echo"})


def test_a_third_partys_package_registers_through_the_entry_point(tmp_path):
    """A distribution on the path whose entry_points.txt names the benchmark: the registry finds it."""
    info = tmp_path / "site" / "echo_benchmark-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-benchmark\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[harness.benchmarks]\necho = tests.helpers.echo_benchmark:BENCHMARK\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    listed = subprocess.run([str(Path(sys.executable).with_name("harness")), "benchmarks"], capture_output=True,
                            text=True, env=env, cwd=ROOT, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "echo: Echo (scorers: echo; epochs: 1)" in listed.stdout.splitlines()
    with pytest.raises(InputError, match="unknown benchmark 'echo'"):
        get("echo")  # this process has no such distribution: nothing is registered by accident
