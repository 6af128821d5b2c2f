"""A Harbor task folder checked at load as Harbor checks it (issue 37 item 5, issue 38 item 3), before any container:
every file of it (a link out of the folder, a FIFO, a link cycle: refused naming the file, so instruction.md is never
a host file's text), every key of task.toml (an unknown one refused naming the nearest known one, as `harbor lint`
does), and the values the engine cannot give (a timeout that is no finite number, no memory, more CPUs than the
engine has, a GPU, a verifier image of its own). Each refusal is exit 2 from the CLI."""

from __future__ import annotations

import os

import pytest

from harness.datasets import load_dataset
from harness.errors import InputError
from tests.helpers.e2e import explain, harness
from tests.test_harbor import app_dockerfile, write_task


def refused(tmp_path, folder) -> str:
    with pytest.raises(InputError) as caught:
        load_dataset(f"harbor:{folder}")
    return str(caught.value)


# ---------------------------------------------------------------- every file of the folder


def test_an_instruction_that_links_to_a_host_file_is_refused_naming_it(tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("the host's secret\n")
    folder = write_task(tmp_path / "set", "leak", app_dockerfile("some-base:1"), instruction=None)
    (folder / "instruction.md").symlink_to(secret)
    said = refused(tmp_path, tmp_path / "set")
    assert f"task {folder.resolve()}: instruction.md is a link to {secret}, outside the task folder" in said, said
    assert "the host's secret" not in said


@pytest.mark.parametrize("plant, says", [
    (lambda f, host: (f / "tests" / "conftest.py").symlink_to(host), "tests/conftest.py is a link to"),
    (lambda f, host: (f / "solution" / "data").symlink_to(host.parent), "solution/data is a link to"),
    (lambda f, host: (f / "environment" / "x").symlink_to("/etc/passwd"), "environment/x is a link to /etc/passwd"),
    (lambda f, host: (f / "tests" / "gone").symlink_to(f / "no-such-file"), "tests/gone is a link to nothing"),
    (lambda f, host: os.mkfifo(f / "tests" / "pipe"), "tests/pipe is not a regular file or folder"),
    (lambda f, host: ((f / "tests" / "a").symlink_to(f / "tests" / "b"), (f / "tests" / "b").symlink_to(
        f / "tests" / "a")), "tests/a is a link to nothing"),
])
def test_a_link_out_of_the_folder_or_an_odd_file_is_refused_at_load(tmp_path, plant, says):
    host = tmp_path / "host" / "secret.txt"
    host.parent.mkdir()
    host.write_text("x")
    folder = write_task(tmp_path / "set", "bad", app_dockerfile("some-base:1"))
    plant(folder, host)
    said = refused(tmp_path, tmp_path / "set")
    assert f"task {folder.resolve()}: {says}" in said, said


def test_links_inside_the_folder_are_fine(tmp_path):
    folder = write_task(tmp_path / "set", "fine", app_dockerfile("some-base:1"), instruction=None)
    (folder / "docs").mkdir()
    (folder / "docs" / "task.md").write_text("Do it.")
    (folder / "instruction.md").symlink_to(folder / "docs" / "task.md")
    (folder / "tests" / "shared").symlink_to("../docs")
    (task,) = load_dataset(f"harbor:{tmp_path / 'set'}").instances
    assert task.question == "Do it."


def test_a_task_folder_in_a_set_that_links_out_of_it_is_refused(tmp_path):
    elsewhere = write_task(tmp_path / "elsewhere", "t", app_dockerfile("some-base:1"))
    write_task(tmp_path / "set", "fine", app_dockerfile("some-base:1"))
    (tmp_path / "set" / "linked").symlink_to(elsewhere)
    said = refused(tmp_path, tmp_path / "set")
    assert f"task folder {tmp_path / 'set' / 'linked'} is a link to {elsewhere}, outside" in said, said


# ---------------------------------------------------------------- task.toml's keys, as harbor lint reads them


@pytest.mark.parametrize("toml, says", [
    ("[verifer]\ntimeout_sec = 5.0\n", "unknown section [verifer] (did you mean [verifier]?)"),
    ("[agent]\ntimeout = 5.0\n", "unknown key agent.timeout (did you mean agent.timeout_sec?)"),
    ("[environment]\ncpu = 2\n", "unknown key environment.cpu (did you mean environment.cpus?)"),
    ("[environment.healthcheck]\ncommand = 'true'\nretry = 3\n",
     "unknown key environment.healthcheck.retry (did you mean environment.healthcheck.retries?)"),
    ("difficulty = 'easy'\n", "unknown key difficulty"),
    ("[[environment.mcp_servers]]\nname = 'x'\ncommand = 'y'\nargz = []\n",
     "unknown key environment.mcp_servers[0].argz (did you mean environment.mcp_servers[0].args?)"),
])
def test_an_unknown_key_of_task_toml_is_refused_naming_the_nearest_known_one(tmp_path, toml, says):
    folder = write_task(tmp_path / "set", "typo", app_dockerfile("some-base:1"), toml=toml)
    said = refused(tmp_path, tmp_path / "set")
    assert f"task {folder.resolve()}: task.toml: {says}" in said, said


def test_every_key_of_harbors_own_schema_is_known(tmp_path):
    """A task.toml using Harbor 0.25's keys (its own names, old and new) loads: none is taken for a typo."""
    toml = """schema_version = "1.4"
version = "1.0"
source = "somewhere"
[task]
name = "org/hello"
description = "d"
keywords = ["k"]
authors = [{name = "a", email = "a@b.c"}]
[metadata]
anything = {goes = "here"}
[verifier]
timeout_sec = 30.0
env = {A = "1"}
user = "agent"
network_mode = "public"
[agent]
timeout_sec = 60.0
user = "agent"
[environment]
build_timeout_sec = 300.0
os = "linux"
cpus = 1
memory_mb = 512
storage_mb = 1024
gpus = 0
env = {B = "2"}
workdir = "/app"
allow_internet = true
[environment.healthcheck]
command = "true"
interval_sec = 1.0
timeout_sec = 2.0
start_period_sec = 0.0
start_interval_sec = 1.0
retries = 3
[solution]
env = {C = "3"}
"""
    write_task(tmp_path / "set", "all", app_dockerfile("some-base:1"), toml=toml)
    (task,) = load_dataset(f"harbor:{tmp_path / 'set'}").instances
    assert task.cpus == 1 and task.memory == "512m" and task.build_timeout == 300.0


# ---------------------------------------------------------------- values the engine cannot give


@pytest.mark.parametrize("toml, says", [
    ("[agent]\ntimeout_sec = inf\n", "agent.timeout_sec inf is not a finite number of seconds"),
    ("[verifier]\ntimeout_sec = nan\n", "verifier.timeout_sec nan is not a finite number of seconds"),
    ("[verifier]\ntimeout_sec = 1e12\n", "verifier.timeout_sec 1e+12 is more than"),
    ("[environment]\nbuild_timeout_sec = inf\n", "environment.build_timeout_sec inf is not a finite number"),
    ("[environment]\ncpus = inf\n", "environment.cpus inf is not a finite number of CPUs"),
    ('[environment]\nmemory = "0"\n', "environment.memory '0' is no size of at least 6 MB"),
    ("[environment]\nmemory_mb = 1\n", "environment.memory_mb 1 is no size of at least 6 MB"),
    ("[environment]\ngpus = 1\n", "environment.gpus 1: a sandbox gets no GPU"),
    ('[environment]\nos = "windows"\n', 'environment.os "windows": sandboxes are Linux containers'),
])
def test_a_value_the_engine_cannot_give_is_refused_at_load(tmp_path, toml, says):
    folder = write_task(tmp_path / "set", "odd", app_dockerfile("some-base:1"), toml=toml)
    said = refused(tmp_path, tmp_path / "set")
    assert f"task {folder.resolve()}: task.toml: {says}" in said, said


def test_the_cli_refuses_a_typo_with_exit_2_before_any_container(tmp_path):
    folder = write_task(tmp_path / "set", "typo", app_dockerfile("some-base:1"), toml="[verifer]\ntimeout_sec = 5\n")
    proc = harness("run", "--dataset", f"harbor:{tmp_path / 'set'}", "--agent", "oracle", "--model", "replay",
                   "--scorer", "harbor", "--output-dir", tmp_path / "out")
    assert proc.returncode == 2, explain(proc)
    assert f"task {folder.resolve()}: task.toml: unknown section [verifer] (did you mean [verifier]?)" in proc.stderr


def test_more_cpus_than_the_engine_has_is_refused_naming_the_instance():
    from harness.config import Sandbox
    from harness.runner.preflight import check_capacity
    from harness.sandbox.contract import Capacity

    class Task:
        instance_id, cpus, memory = "big", 64.0, "1g"

    with pytest.raises(InputError, match="instance big: its own cpus 64 are more than the engine's 2 CPU"):
        check_capacity(Sandbox(), Capacity(cpus=2, memory=8 * 2**30), [Task()])
    Task.cpus, Task.memory = 1.0, "64g"
    with pytest.raises(InputError, match="instance big: its own memory 64g is more than the engine's 8.0 GiB"):
        check_capacity(Sandbox(), Capacity(cpus=2, memory=8 * 2**30), [Task()])


# ---------------------------------------------------------------- the guide's Harbor examples, as written


def guide_commands() -> list[str]:
    """The commands of the guide's first code block under "### Harbor tasks" (continuation lines joined)."""
    import re

    from tests.helpers.e2e import REPO

    text = (REPO / "docs" / "guide.md").read_text(encoding="utf-8").split("### Harbor tasks", 1)[1]
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "no bash block under Harbor tasks"
    return [line.split("  #")[0].strip() for line in block.group(1).replace("\\\n", " ").splitlines() if line.strip()]


def test_the_guides_harbor_examples_name_agents_that_exist():
    import re

    from harness.agents.registry import resolve

    commands = guide_commands()
    agents = [agent for command in commands for agent in re.findall(r"--agent (\S+)", command)]
    assert agents, commands
    for agent in agents:
        resolve(agent)  # an unknown agent (`autogen`) is an InputError, exit 2
    for command in commands:
        if "datasets/harbor-smoke" in command:
            load_dataset(command.split("--dataset ", 1)[1].split()[0])  # the shipped example loads


@pytest.mark.docker
def test_the_guides_harbor_examples_run_as_written(tmp_path, provider, image):
    """The guide's offline commands, run as written (the base made by its build line: the harness's own offline
    base, tagged as the line tags it when the engine does not have the tag yet), each passing its task."""
    import json
    import shlex
    import subprocess

    from harness.sandbox.docker import images
    from tests.helpers.e2e import REPO, out_dir

    build, *runs = guide_commands()
    tag = shlex.split(build)[-1]
    assert build.startswith("bash images/base/build.sh ") and (REPO / "images/base/build.sh").is_file()
    made = subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode != 0
    if made:  # what build.sh makes, made once already by the harness (images/base/build.sh either way)
        subprocess.run(["docker", "tag", images._ensure_base(lambda m: None), tag], check=True, timeout=60)
    offline = [shlex.split(run) for run in runs if "--config" not in run]
    assert len(offline) == 2, runs
    try:
        for argv in offline:
            assert argv[:2] == [".venv/bin/harness", "run"], argv
            out = out_dir(tmp_path)
            argv[argv.index("--output-dir") + 1] = str(out)
            proc = harness(*argv[1:])
            assert proc.returncode == 0, explain(proc)
            rows = [json.loads(line) for line in (out / "output.jsonl").read_text().splitlines()]
            assert [(r["instance_id"], r["correct"]) for r in rows] == [("hello", True)], rows
    finally:
        from harness.sandbox.docker.task_images import task_tag

        context = REPO / "datasets/harbor-smoke/hello/environment"
        subprocess.run(["docker", "rmi", task_tag(context)], capture_output=True, timeout=120)
        if made:
            subprocess.run(["docker", "rmi", tag], capture_output=True, timeout=120)


def test_the_nop_agent_does_nothing_and_needs_no_model():
    """`--agent nop`, Harbor's `nop`: no work, no answer, no model (the parity test runs it beside Harbor's)."""
    import asyncio

    from harness.agents.registry import NO_MODEL, resolve

    runner = resolve("nop")()
    assert asyncio.run(runner.turn("Write hello into /app/answer.txt.")) == "" and "nop" in NO_MODEL
    proc = harness("run", "--dataset", "harbor:datasets/harbor-smoke", "--agent", "plain")
    assert proc.returncode == 2 and "--agent oracle or nop, which call no model" in proc.stderr, explain(proc)
