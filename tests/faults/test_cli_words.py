"""What the command line says when a practitioner slips (issue 29 item 19, the CLI's parts): `--model NAME`
without `--config` blamed the config ("no [llm.gpt4o] section in the config (known: none)") when none was
given; `--agent asistant` listed the built-ins without the one meant; `harness images list | cat` cut tags to
an 80-column table (`harness-sandbox:2…`); `--memory 2gb` then `--memory 2g` on the same directory was a
"changed configuration" resume refused. Each is the real CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from harness import exit_codes
from tests.helpers.e2e import REPO, containers_of, dataset_42, explain, harness, out_dir, remove_leftovers


def test_a_model_name_without_a_config_says_none_was_given_and_names_the_no_toml_flags(tmp_path):
    proc = harness("run", "--dataset", REPO / "datasets" / "gaia-smoke", "--model", "gpt4o",
                   "--output-dir", out_dir(tmp_path), timeout=120)
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    assert "--model gpt4o: no --config was given" in proc.stderr, proc.stderr
    assert "--model openai-compatible/gpt4o --model-base-url URL" in proc.stderr, proc.stderr
    assert "(known: none)" not in proc.stderr


@pytest.mark.parametrize(("typed", "meant"), [("asistant", "assistant"), ("plian", "plain"),
                                              ("roundrobbin", "roundrobin")])
def test_a_misspelt_agent_is_given_the_built_in_meant(tmp_path, typed, meant):
    proc = harness("run", "--dataset", REPO / "datasets" / "gaia-smoke", "--model", "replay", "--agent", typed,
                   "--output-dir", out_dir(tmp_path), timeout=120)
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    assert f"--agent {typed}: not a built-in agent" in proc.stderr
    assert f"(did you mean {meant}?)" in proc.stderr, proc.stderr


@pytest.mark.docker
def test_images_list_into_a_pipe_prints_whole_tags(image):
    listed = subprocess.run(f"{sys.executable} -m harness images list | cat", shell=True, capture_output=True,
                            text=True, timeout=120, cwd=REPO, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"})
    assert listed.returncode == 0, listed.stderr
    lines = [line.split("\t") for line in listed.stdout.splitlines()]
    assert lines[0] == ["tag", "id", "size (MB)", "created", "current"], listed.stdout
    tags = {line[0]: line[4] for line in lines[1:]}
    assert tags.get(image) == "*", (image, listed.stdout)  # the whole tag, marked current
    assert "…" not in listed.stdout


@pytest.mark.docker
def test_two_spellings_of_one_memory_size_resume_as_the_same_run(tmp_path, image, reliability):
    out, t0 = out_dir(tmp_path), time.monotonic()
    data, config = dataset_42(tmp_path / "data", [f"mem-{out.name}"])
    try:
        def run(memory: str) -> subprocess.CompletedProcess:
            return harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                           "--memory", memory, timeout=240)

        first = run("2gb")
        assert first.returncode == exit_codes.OK, explain(first)
        written = json.loads((out / "run.json").read_text())["environment"]["memory"]
        again = [run(memory) for memory in ("2g", "2048m", "2G")]
        reliability.record("a resume with --memory 2g into a run started with --memory 2gb",
                           f"run.json says {written!r}; resumes exit {[p.returncode for p in again]}", lost=0,
                           leaked=len(containers_of(out)), started=t0)
        for proc in again:
            assert proc.returncode == exit_codes.OK, explain(proc)
            assert "refusing to resume" not in proc.stderr
        assert written == "2g"
        other = run("3g")  # another size is still another configuration
        assert other.returncode == exit_codes.INPUT and "environment.memory changed (2g -> 3g)" in other.stderr, \
            explain(other)
    finally:
        assert remove_leftovers(out) == []
