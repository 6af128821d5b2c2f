"""Prompts and conventions: --prompt-template, ScoreContext's instance id and metadata, -h and
--version, the default output directory, and the README's examples (checked as written)."""

from __future__ import annotations

import json
import re
import secrets
import time
from importlib.metadata import version
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.agents.contract import Limits
from harness.cli import app
from harness.config import Scoring
from harness.datasets import load_dataset
from harness.datasets.model import Instance
from harness.errors import InputError
from harness.models.config import load_config, model_section
from harness.results.layout import default_run_dir
from harness.results.run_config import RunConfig, diff, load_run_config
from harness.runner.prompt import BENCHMARK_RULES, FORMAT_RULES, check_template, instruction, load_template
from harness.runner.scorers import build_scorers
from harness.scoring.apply import context_for, score_one
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import (
    FAKE_KEY,
    REPO,
    SUM,
    containers_created_between,
    explain,
    harness,
    one_instance,
    out_dir,
    replay_instance,
    rows,
    trace,
)

QUESTION = "Sum column x of nums.csv."


def _instance(files=(), metadata=None, question="  Q?\n\nsecond line  ") -> Instance:
    return Instance(instance_id="t-1", question=question, root=Path("/tmp"), files=list(files),
                    metadata=metadata or {})


# -- the template ---------------------------------------------------------------------------------

def test_the_default_template_gives_the_prompt_as_before():
    """The default must reproduce the instruction exactly (recordings were made against it)."""
    assert instruction(_instance()) == "Q?\n\nsecond line\n\n" + FORMAT_RULES
    assert instruction(_instance(["a b.csv", "d/e.txt"])) == (
        "Q?\n\nsecond line\n\nThe file(s) for this task are in the sandbox at: /workspace/a b.csv, "
        "/workspace/d/e.txt\n\n" + FORMAT_RULES)
    assert instruction(_instance(metadata={"benchmark": "math500"})).endswith(BENCHMARK_RULES["math500"])
    assert load_template(None).fingerprint == "default"


def test_a_custom_template_fills_its_placeholders_and_drops_an_empty_files_line():
    template = check_template("[{instance_id}] {question}\n\n{files}\n\nRules: {conventions}\n{{literal}}", "t")
    with_files = template.render(_instance(["n.csv"], question="What? {x}"))
    assert with_files == ("[t-1] What? {x}\n\nThe file(s) for this task are in the sandbox at: /workspace/n.csv\n\n"
                          f"Rules: {FORMAT_RULES}\n{{literal}}")
    assert template.render(_instance(question="What?")) == f"[t-1] What?\n\nRules: {FORMAT_RULES}\n{{literal}}"
    assert "GAIA" not in check_template("{question}\nAnswer briefly.", "t").render(_instance())
    assert template.fingerprint.startswith("sha256:")
    assert template.fingerprint != check_template("{question}", "t").fingerprint


@pytest.mark.parametrize("content,message", [
    ("{question} {answer}", "unknown placeholder {answer}"),
    ("{question} {}", "unknown placeholder {}"),
    ("{question.upper}", "unknown placeholder {question.upper}"),
    ("{question!r}", "no conversion or format spec"),
    ("{question:>40}", "no conversion or format spec"),
    ("{question} }", "Single '}'"),
    ("{question} {", "Single '{'"),
    ("Answer with a number.", "never uses {question}"),
])
def test_bad_templates_are_input_errors_naming_the_flag(tmp_path, content, message):
    path = tmp_path / "prompt.txt"
    path.write_text(content)
    with pytest.raises(InputError) as caught:
        load_template(path)
    assert str(caught.value).startswith(f"--prompt-template {path}: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_unreadable_template_is_an_input_error(tmp_path):
    for path in (tmp_path / "missing.txt", tmp_path):
        with pytest.raises(InputError, match=f"--prompt-template {re.escape(str(path))}: cannot read it"):
            load_template(path)
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("{question} caf\xe9".encode("latin-1"))
    with pytest.raises(InputError, match="cannot read it"):
        load_template(latin)


def test_the_template_is_part_of_the_run_configuration(tmp_path):
    base = dict(dataset="d", dataset_fingerprint="f", model="m", agent="a", image="i")
    default, custom = RunConfig(**base), RunConfig(**base, prompt_template="sha256:0123456789abcdef")
    assert default.fingerprint() != custom.fingerprint()
    assert diff(default, custom) == ["prompt_template changed (default -> sha256:0123456789abcdef)"]
    (tmp_path / "run.json").write_text(json.dumps(base))  # a run.json written before the field existed
    assert load_run_config(tmp_path).fingerprint() == default.fingerprint()


# -- the scorer's context -----------------------------------------------------------------------------

def test_score_context_carries_the_instance_id_and_metadata():
    context = context_for(tool_calls=[], total_tokens=0, steps=0, limits=Limits(), question="q",
                          instance_id="t-1", metadata={"tolerance": 0.5})
    (echo,) = build_scorers(Scoring(names=("tests.helpers.scorers:echo_context",)))
    assert score_one(echo, "1", "1", context).details == {"instance_id": "t-1", "metadata": {"tolerance": 0.5}}
    old_style = context_for(tool_calls=[], total_tokens=0, steps=0, limits=Limits(), question="q")
    assert (old_style.instance_id, old_style.metadata) == ("", {})


# -- the command line ---------------------------------------------------------------------------------

def _commands(group, prefix=()):
    for name, command in group.commands.items():
        yield (*prefix, name)
        if hasattr(command, "commands"):
            yield from _commands(command, (*prefix, name))


def test_every_command_takes_h_for_help():
    group = typer.main.get_command(app)
    paths = [(), *_commands(group)]
    assert ("images", "build") in paths and ("run",) in paths
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(app, [*path, "-h"])
        assert result.exit_code == 0 and "Usage:" in result.output and "--help" in result.output, (path, result.output)


def test_version_comes_from_the_package_metadata():
    proc = harness("--version", script=True)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.strip() == f"harness {version('harness')}"


def test_default_run_dir_is_named_after_the_dataset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    at = time.mktime((2025, 3, 4, 5, 6, 7, 0, 0, -1))
    (tmp_path / "GAIA").mkdir()
    assert default_run_dir(Path("GAIA"), "validation", at) == Path("runs/GAIA-validation-20250304-050607")
    assert default_run_dir(Path("/data/math500/test.jsonl"), None, at) == Path("runs/math500-test-20250304-050607")
    assert default_run_dir(Path("my tasks.csv"), None, at) == Path("runs/my-tasks-20250304-050607")
    (tmp_path / "runs" / "GAIA-20250304-050607").mkdir(parents=True)  # two runs started in the same second
    assert default_run_dir(Path("GAIA"), None, at) == Path("runs/GAIA-20250304-050607-2")


# -- the README's examples ----------------------------------------------------------------------------

def readme_examples() -> dict[str, str]:
    """The fenced blocks of the README's "Your own ..." section, by the file they are."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Your own models, tasks, agents and scorers", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    by_lang: dict[str, list[str]] = {}
    for lang, body in blocks:
        by_lang.setdefault(lang, []).append(body)
    return {"models.toml": by_lang["toml"][0], "tasks.jsonl": by_lang["json"][0], "my_agents.py": by_lang["python"][0],
            "my_scorers.py": by_lang["python"][1], "prompt.txt": by_lang["text"][0], "command": by_lang["bash"][0]}


def write_examples(folder: Path) -> dict[str, str]:
    examples = readme_examples()
    for name, body in examples.items():
        if name != "command":
            (folder / name).write_text(body)
    (folder / "nums.csv").write_text("x\n1\n2\n3\n")
    return examples


def test_readme_examples_load_as_written(tmp_path, monkeypatch):
    write_examples(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("VLLM_API_KEY", "k")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    config = load_config(tmp_path / "models.toml")
    qwen, gpt4o = model_section(config, "qwen"), model_section(config, "gpt4o")
    assert (qwen.model, qwen.model_info) == ("Qwen/Qwen2.5-7B-Instruct", None)
    assert (gpt4o.max_connections, gpt4o.model_info["function_calling"]) == (8, True)
    (task,) = load_dataset(tmp_path / "tasks.jsonl", None)
    assert (task.instance_id, task.files, task.metadata) == ("sum-1", ["nums.csv"], {"tolerance": 0.01})
    (scorer,) = build_scorers(Scoring(names=("my_scorers:close_enough",)))
    context = context_for(tool_calls=[], total_tokens=0, steps=0, limits=Limits(), question=task.question,
                          instance_id=task.instance_id, metadata=task.metadata)
    judged = [score_one(scorer, a, "6", context).correct for a in ("6", "6.05", "6.1", "six")]
    assert judged == [True, True, False, False]
    from harness.agents.registry import resolve

    assert resolve("my_agents:careful")().target.__name__ == "careful"
    prompt = load_template(tmp_path / "prompt.txt").render(task)
    assert prompt.startswith(task.question) and "GAIA" not in prompt and "/workspace/nums.csv" in prompt
    for flag in ("--prompt-template prompt.txt", "--scorer my_scorers:close_enough", "--agent my_agents:careful",
                 "--config models.toml", "--dataset tasks.jsonl"):
        assert flag in examples_command(), flag


def examples_command() -> str:
    return " ".join(readme_examples()["command"].replace("\\\n", " ").split())


# -- end to end, real sandboxes ------------------------------------------------------------------------

@pytest.mark.docker
def test_readme_examples_run_and_the_template_is_the_agents_first_message(tmp_path):
    """The README's TOML section, row, factory, scorer and template in a real run, against a local
    OpenAI-compatible server that records what the agent was told."""
    write_examples(tmp_path)
    script = [tool_calls(("run_python", {"code": "import pandas as pd; print(pd.read_csv('nums.csv').x.sum())"})),
              text("The sum is <solution>6.0</solution>")]
    with FakeOpenAI(script) as server:
        toml = (tmp_path / "models.toml").read_text().replace("http://localhost:8000/v1", server.base_url)
        (tmp_path / "models.toml").write_text(toml)
        out = out_dir(tmp_path)
        args = examples_command().split()[1:]  # the README's command, as written, after `.venv/bin/harness`
        proc = harness(*args, "--output-dir", out, env={"VLLM_API_KEY": FAKE_KEY}, cwd=tmp_path)
        chats = server.chat_requests
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["answer"] == "6.0" and row["scores"]["close_enough"]["correct"] is True
    messages = chats[0]["json"]["messages"]
    expected = load_template(tmp_path / "prompt.txt").render(load_dataset(tmp_path / "tasks.jsonl", None)[0])
    users = [m for m in messages if m["role"] == "user"]
    assert users[0]["content"] == expected and "GAIA" not in json.dumps(messages)
    assert "Check every figure with run_python" in json.dumps(messages)  # the factory's agent answered
    assert json.loads((out / "run.json").read_text())["prompt_template"].startswith("sha256:")


@pytest.mark.docker
def test_an_unknown_placeholder_exits_2_before_any_container(tmp_path):
    iid = f"conv-{secrets.token_hex(4)}"  # its own id: other tests on the same engine start sandboxes too
    data, config = replay_instance(tmp_path, iid, QUESTION, "6", SUM, {"nums.csv": "x\n1\n2\n3\n"})
    (tmp_path / "prompt.txt").write_text("{question}\n{answer}\n")
    out = out_dir(tmp_path)
    since = time.time()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--prompt-template", tmp_path / "prompt.txt")
    assert proc.returncode == 2, explain(proc)
    line = f"error (input): --prompt-template {tmp_path / 'prompt.txt'}: unknown placeholder {{answer}}"
    assert line in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not containers_created_between(iid, since - 1, time.time() + 1) and not out.exists()


@pytest.mark.docker
def test_plugin_scorers_see_the_instance_id_and_metadata_on_run_and_rescore(tmp_path):
    data, config = one_instance(tmp_path, SUM)
    row = json.loads(data.read_text())
    data.write_text(json.dumps({**row, "tolerance": 0.01, "tags": ["csv", "sum"]}) + "\n")
    out = out_dir(tmp_path)
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--scorer", "tests.helpers.scorers:echo_context")
    assert proc.returncode == 0, explain(proc)
    want = {"instance_id": "only one", "metadata": {"tolerance": 0.01, "tags": ["csv", "sum"]}}
    assert rows(out)[0]["scores"]["echo_context"]["details"] == want
    again = harness("score", out, "--scorer", "tests.helpers.scorers:echo_context")
    assert again.returncode == 0, explain(again)
    assert rows(out)[0]["scores"]["echo_context"]["details"] == want


@pytest.mark.docker
def test_resuming_with_another_template_is_refused_without_force(tmp_path):
    data, config = one_instance(tmp_path, SUM)
    (tmp_path / "a.txt").write_text("{question}\n\n{files}\n\nAnswer in <solution></solution>.")
    (tmp_path / "b.txt").write_text("{question}\n\n{files}\n\nAnswer inside <solution></solution>.")
    out = out_dir(tmp_path)
    run = lambda *flags: harness("run", "--dataset", data, "--model", "rec", "--config", config,  # noqa: E731
                                 "--output-dir", out, *flags)
    first = run("--prompt-template", tmp_path / "a.txt")
    assert first.returncode == 0, explain(first)
    task = next(e for e in trace(out, rows(out)[0]) if e["type"] == "task")
    assert task["task"].endswith("Answer in <solution></solution>.")
    for flags in (("--prompt-template", tmp_path / "b.txt"), ()):
        refused = run(*flags)
        assert refused.returncode == 2 and "prompt_template changed" in refused.stderr, explain(refused)
    same = run("--prompt-template", tmp_path / "a.txt")
    assert same.returncode == 0 and "already finished" in same.stderr, explain(same)
    forced = run("--prompt-template", tmp_path / "b.txt", "--force")
    assert forced.returncode == 0, explain(forced)


@pytest.mark.docker
def test_without_output_dir_the_run_goes_to_runs_dataset_timestamp_and_says_so(tmp_path):
    data, config = one_instance(tmp_path, SUM)
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    (chosen,) = re.findall(r"output directory: (\S+) ", proc.stderr)
    assert re.fullmatch(rf"runs/{re.escape(tmp_path.name)}-data-\d{{8}}-\d{{6}}", chosen), chosen
    assert [r["instance_id"] for r in rows(tmp_path / chosen)] == ["only one"]
    assert [p.relative_to(tmp_path).as_posix() for p in (tmp_path / "runs").iterdir() if p.is_dir()] == [chosen]
