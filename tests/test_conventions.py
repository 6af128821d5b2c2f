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
from harness.benchmark import get
from harness.cli import app
from harness.config import Scoring
from harness.datasets import load_dataset
from harness.datasets.model import Instance
from harness.errors import InputError
from harness.models.config import load_config, model_section
from harness.results.layout import default_run_dir
from harness.runner.prompt import check_template, instruction, load_template
from harness.runner.run_config import RunConfig, diff, load_run_config
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
FORMAT_RULES = get("gaia").conventions  # a dataset of one's own is prompted as GAIA's


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
    assert instruction(_instance().model_copy(update={"benchmark": "math500"})).endswith(get("math500").conventions)
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


# -- the README's and docs' examples ------------------------------------------------------------------

EXAMPLE = re.compile(r"<!-- example: (\S+) -->\n```\w*\n(.*?)```", flags=re.S)
FENCED = re.compile(r"^```(\w+)\n(.*?)^```", flags=re.S | re.M)


def doc_pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def readme_examples() -> dict[str, str]:
    """The README's fenced blocks marked `<!-- example: NAME -->`, by the file (or command) they are."""
    found: dict[str, str] = {}
    for name, body in EXAMPLE.findall((REPO / "README.md").read_text()):
        assert name not in found, f"README: two examples named {name}"
        found[name] = body
    return found


def write_examples(folder: Path) -> dict[str, str]:
    examples = readme_examples()
    for name, body in examples.items():
        if not name.startswith("command"):
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
    (task,) = load_dataset(tmp_path / "tasks.jsonl", None).instances
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


def fenced(lang: str) -> list[tuple[str, str]]:
    """Every fenced `lang` block of the README and docs/, with the page it is on."""
    return [(page.relative_to(REPO).as_posix(), body) for page in doc_pages()
            for found, body in FENCED.findall(page.read_text()) if found == lang]


def test_the_readme_marks_every_example_the_tests_run():
    assert set(readme_examples()) == {"command-no-toml", "models.toml", "tasks.jsonl", "prompt.txt", "gaia.toml",
                                      "my_agents.py", "my_scorers.py", "command"}


def check_toml(tmp_path: Path, page: str, body: str) -> None:
    """A TOML example is a config `--config` takes: every [llm.NAME] a valid section, [search] and
    [mcp.NAME] valid tables (InputError naming the key otherwise)."""
    from harness.config import TomlConfig
    from harness.environments.websearch.settings import resolve

    path = tmp_path / "example.toml"
    path.write_text(body)
    config = TomlConfig(path)  # [mcp.NAME] tables are read here
    data = load_config(path)
    assert set(data) <= {"llm", "search", "mcp", "scorer"}, (page, sorted(data))
    for name in data.get("llm", {}):
        config.section(name)
    resolve(None, None, False, config.search, website=False)


def test_every_toml_example_of_the_readme_and_docs_is_a_valid_config(tmp_path):
    examples = fenced("toml")
    assert len(examples) >= 8 and any(page == "README.md" for page, _ in examples)
    for page, body in examples:
        try:
            check_toml(tmp_path, page, body)
        except InputError as exc:
            raise AssertionError(f"{page}: a TOML example is refused: {exc}\n{body}") from None
    with pytest.raises(InputError, match="max_connection"):  # the check sees a mistyped key
        check_toml(tmp_path, "t", '[llm.m]\nmodel = "m"\nmax_connection = 8\n')


def command_lines(body: str) -> list[list[str]]:
    """A bash block's command lines as words: continuations joined, comments dropped."""
    import shlex

    joined = body.replace("\\\n", " ")
    return [words for line in joined.splitlines() if (words := shlex.split(line, comments=True))]


def harness_problems(words: list[str]) -> list[str]:
    """What is wrong with one harness command line: an unknown command or flag, a bundled path that is
    not there. The words after `harness` (or after the compose service named harness) are checked."""
    start = next((i for i, w in enumerate(words) if w == "harness" or w.endswith("/harness")), None)
    if start is None:
        return [f"{words[0]}: no such file"] if words[:1] == ["bash"] and not (REPO / words[1]).is_file() else []
    command = typer.main.get_command(app)  # typer's own click: groups are told by their commands
    args, path = words[start + 1:], ["harness"]
    while hasattr(command, "commands") and args and args[0] in command.commands:
        path.append(args[0])
        command = command.commands[args.pop(0)]
    if hasattr(command, "commands") and args and not args[0].startswith("-"):
        return [f"{' '.join(path)} {args[0]}: no such command"]
    passed: list[str] = []  # after `--`: `harness run` flags a command hands on (harness noise)
    if "--" in args and command.context_settings.get("allow_extra_args"):
        args, passed = args[:args.index("--")], args[args.index("--") + 1:]
    problems = _unknown(command, args)
    problems += _unknown(typer.main.get_command(app).commands["run"], passed)
    for flag, value in zip(args + passed, (args + passed)[1:], strict=False):
        if flag in ("--dataset", "--website") and value.startswith("datasets/") and not (REPO / value).exists():
            problems.append(f"{flag} {value}: no such path")
    return problems


def _unknown(command, args: list[str]) -> list[str]:
    flags = {name for param in command.params for name in (*param.opts, *param.secondary_opts)} | {"--version"}
    return [f"{word.split('=')[0]}: not a flag of {command.name}" for word in args
            if word.startswith("-") and word.split("=")[0] not in flags]


def test_every_command_example_of_the_readme_and_docs_names_real_commands_flags_and_paths():
    lines = [(page, words) for page, body in fenced("bash") for words in command_lines(body)]
    checked = [(page, words) for page, words in lines if "harness" in " ".join(words)]
    assert len(checked) >= 30 and {page for page, _ in checked} >= {"README.md", "docs/guide.md", "docs/results.md"}
    problems = [f"{page}: {' '.join(words)}: {problem}" for page, words in lines for problem in harness_problems(words)]
    assert not problems, "\n".join(problems)
    assert harness_problems(["harness", "run", "--datset", "x", "--website", "datasets/none"]) == \
        ["--datset: not a flag of run", "--website datasets/none: no such path"]
    assert harness_problems(["harness", "noise", "r", "--reruns", "2", "--", "--websit", "x"]) == \
        ["--websit: not a flag of run"]
    assert harness_problems(["harness", "images", "burn"]) == ["harness images burn: no such command"]


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
    expected = load_template(tmp_path / "prompt.txt").render(load_dataset(tmp_path / "tasks.jsonl", None).instances[0])
    users = [m for m in messages if m["role"] == "user"]
    assert users[0]["content"] == expected and "GAIA" not in json.dumps(messages)
    assert "Check every figure with run_python" in json.dumps(messages)  # the factory's agent answered
    assert json.loads((out / "run.json").read_text())["prompt_template"].startswith("sha256:")


@pytest.mark.docker
def test_the_readmes_command_without_a_toml_runs_against_an_openai_compatible_server(tmp_path):
    """`--model openai-compatible/NAME --model-base-url URL` as the README writes it (one instance of
    its three), against a local server: the agent calls that model there."""
    command = " ".join(readme_examples()["command-no-toml"].replace("\\\n", " ").split())
    assert "--config" not in command and "--model openai-compatible/" in command
    with FakeOpenAI([], default=text("<solution>42</solution>")) as server:
        args = command.replace("http://localhost:8000/v1", server.base_url).split()[1:]
        out = out_dir(tmp_path)
        proc = harness(*args, "--limit", "1", "--output-dir", out)
        chats = server.chat_requests
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["answer"] == "42", row
    assert chats and {c["json"]["model"] for c in chats} == {"Qwen/Qwen2.5-7B-Instruct"}


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


def test_a_gaia2_scenario_is_told_its_apps_conventions_and_never_where_its_scenario_file_is(tmp_path):
    """A Gaia2 scenario file holds the oracle's actions: the prompt names no file (it goes to the judge's sandbox
    alone: tests/test_gaia2_isolation.py), and the conventions are Gaia2's, not GAIA's <solution> ones."""
    scenario = Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"
    (one,) = [i for i in load_dataset(scenario).instances if i.instance_id == "proto_forward_email"]
    said = instruction(one, load_template(None))
    assert one.files and "proto_forward_email.json" not in said and "/workspace" not in said
    assert "AgentUserInterface__send_message_to_user" in said and FORMAT_RULES not in said
    harbor = Instance(instance_id="t", question="Make /app/x.", root=tmp_path, benchmark="harbor")
    assert get("harbor").conventions in instruction(harbor, load_template(None))
