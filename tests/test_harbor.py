"""Harbor tasks in: `--dataset harbor:PATH` (harness/benchmarks/harbor/dataset.py), each task's own image built from its
environment/ with sandboxd injected (harness/sandbox/docker/task_images.py), its verifier run after the agent
(harness/benchmarks/harbor/environment.py) and read by the harbor scorer, its solution/ as `--agent oracle`.

The Docker tests build real images from small Dockerfiles on the harness's offline base (found the way the
harness finds it), run a task set written here (the oracle passes each task, a replayed wrong agent fails each),
refuse a task whose base is missing before any container, and check limits and the network policy inside a
task's own image. Every image they build is theirs (its tag names this session's base) and removed after."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.agents.contract import Limits
from harness.benchmarks.harbor.environment import REWARDS, reward
from harness.benchmarks.harbor.scorer import HarborScorer
from harness.datasets import load_dataset
from harness.errors import InputError, SandboxFileNotFound, SandboxOutputLimit, ScorerError
from harness.fsutil import tree_hash
from harness.report.build import build_report
from harness.results.model import ResultRow
from harness.sandbox.contract import DEFAULT_MAX_READ, SandboxSpec
from harness.scoring.base import ScoreContext
from tests.helpers.e2e import containers_of, explain, harness, out_dir, remove_leftovers, rows, trace

TOML = """version = "1.0"
[metadata]
difficulty = "easy"
[verifier]
timeout_sec = 60.0
[agent]
timeout_sec = 120.0
[environment]
cpus = 1
memory_mb = 512
"""
# The verifier of the `hello` tasks: reward 1 when /app/answer.txt says hello and the image's own file is still in
# its working directory (seeded into the sandbox's writable mount), else 0.
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = hello ] && [ "$(cat seed.txt)" = seeded ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
SANDBOXED = Path("tests/data/sandboxed/agent.py")  # an agent program of our own, run inside the sandbox
SOLVE_SH = "#!/bin/bash\necho hello > /app/answer.txt\n"


def write_task(root: Path, name: str, dockerfile: str, *, toml: str = TOML, test_sh: str = TEST_SH,
               solve_sh: str | None = SOLVE_SH, instruction: str | None = "Write hello into /app/answer.txt.") -> Path:
    folder = root / name
    for part in ("environment", "tests", "solution"):
        (folder / part).mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(toml)
    (folder / "environment" / "Dockerfile").write_text(dockerfile)
    (folder / "tests" / "test.sh").write_text(test_sh)
    if solve_sh is not None:
        (folder / "solution" / "solve.sh").write_text(solve_sh)
    if instruction is not None:
        (folder / "instruction.md").write_text(instruction)
    return folder


def no_turns(tasks: Path, *names: str) -> None:
    """The replay file a run's --model replay reads: no turns for the oracle's instances, which call no model."""
    (tasks / "replay.jsonl").write_text("".join(json.dumps({"instance_id": n, "turns": []}) + "\n" for n in names))


def app_dockerfile(base: str, extra: str = "") -> str:
    return f"FROM {base}\nWORKDIR /app\nRUN echo seeded > /app/seed.txt\n{extra}"


# ---------------------------------------------------------------- the task format, without an engine

def test_a_task_folder_and_a_folder_of_tasks_become_instances(tmp_path):
    write_task(tmp_path / "set", "hello", app_dockerfile("some-base:1"))
    write_task(tmp_path / "set", "other", app_dockerfile("some-base:1"),
               toml='[agent]\ntimeout_sec = 30\n[environment]\ncpus = 2\nmemory = "1G"\n')
    data = load_dataset(f"harbor:{tmp_path / 'set'}")
    got = {i.instance_id: i for i in data.instances}
    assert sorted(got) == ["hello", "other"]
    hello = got["hello"]
    assert hello.question == "Write hello into /app/answer.txt."
    assert hello.image == str((tmp_path / "set" / "hello" / "environment").resolve()) and hello.files == []
    assert (hello.timeout, hello.cpus, hello.memory) == (180.0, 1, "512m")  # agent + verifier seconds
    assert (got["other"].timeout, got["other"].cpus, got["other"].memory) == (630.0, 2, "1g")  # Harbor's defaults
    assert hello.metadata["task_difficulty"] == "easy" and hello.metadata["verifier_timeout"] == 60.0
    assert hello.limited(Limits(instance_timeout=600)).instance_timeout == 180.0  # the task's own, not the run's
    assert hello.resources({"network": "none", "memory": "2g", "cpus": 1.0, "disk": "2g"})["memory"] == "512m"
    one = load_dataset(f"harbor:{tmp_path / 'set' / 'hello'}")  # one task folder alone
    assert [i.instance_id for i in one.instances] == ["hello"]
    assert load_dataset(tmp_path / "set").fingerprint == data.fingerprint  # found without the prefix too
    (tmp_path / "set" / "hello" / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    assert load_dataset(f"harbor:{tmp_path / 'set'}").fingerprint != data.fingerprint  # the verifier counts


@pytest.mark.parametrize("break_it, says", [
    (lambda f: (f / "task.toml").write_text("[agent\ntimeout_sec = 1"), "task.toml cannot be read"),
    (lambda f: (f / "task.toml").write_text('[agent]\ntimeout_sec = "soon"'), "task.toml: agent.timeout_sec"),
    (lambda f: (f / "task.toml").write_text('[environment]\nmemory = "lots"'), "environment.memory 'lots' is no size"),
    (lambda f: (f / "instruction.md").unlink(), "no instruction.md"),
    (lambda f: (f / "tests" / "test.sh").unlink(), "no tests/test.sh"),
    (lambda f: (f / "task.toml").write_text('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["a.org"]'),
     'network_mode "allowlist" is not supported'),
    (lambda f: (f / "task.toml").write_text('[[steps]]\nname = "one"\n[[steps]]\nname = "two"'),
     "no steps/one/instruction.md"),  # multi-step tasks run (tests/test_harbor_steps.py), each step its folder
    # Harbor runs a compose file's services beside a Dockerfile's main one: before, they were dropped silently
    (lambda f: (f / "environment" / "docker-compose.yaml").write_text("services:\n  db:\n    image: postgres\n"),
     "environment/docker-compose.yaml: a multi-container environment (docker-compose services beside the main one) "
     "is not supported"),
    (lambda f: ((f / "environment" / "Dockerfile").unlink(), (f / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    build: .\n")), "environment/docker-compose.yaml: a multi-container environment"),
    # Harbor's adapter template as it ships, not rendered: Harbor refuses the name (a folder of them: skipped)
    (lambda f: (f / "task.toml").write_text('[task]\nname = "TODO_ORG/{{ADAPTER_ID}}__{task_id}"'),
     "task.name: Value error, 'TODO_ORG/{{ADAPTER_ID}}__{task_id}' is not Harbor's 'org/name'"),
])
def test_a_broken_task_is_refused_naming_its_folder(tmp_path, break_it, says):
    folder = write_task(tmp_path / "set", "broken", app_dockerfile("some-base:1"))
    write_task(tmp_path / "set", "fine", app_dockerfile("some-base:1"))
    break_it(folder)
    with pytest.raises(InputError) as refused:
        load_dataset(f"harbor:{tmp_path / 'set'}")
    assert f"task {folder.resolve()}" in str(refused.value) and says in str(refused.value), refused.value


@pytest.mark.parametrize("toml, network", [
    ('[environment]\nnetwork_mode = "no-network"', "none"),
    ('[agent]\nnetwork_mode = "no-network"', "none"),
    ("[environment]\nallow_internet = false", "none"),
    ('[environment]\nnetwork_mode = "public"', "internet"),  # the run's own policy: a task never widens it
    ("", "internet"),
])
def test_a_task_that_asks_for_no_network_gets_none_whatever_the_runs_policy(tmp_path, toml, network):
    write_task(tmp_path / "set", "t", app_dockerfile("some-base:1"), toml=toml)
    (task,) = load_dataset(f"harbor:{tmp_path / 'set'}").instances
    run = {"network": "internet", "memory": "2g", "cpus": 1.0, "disk": "2g"}
    assert task.resources(run)["network"] == network
    assert task.resources({**run, "network": "none"})["network"] == "none"


def test_a_tasks_environment_variables_are_its_sandboxs_and_no_host_variable_is_read(tmp_path):
    """[environment] env is set in the task's sandbox, as Harbor sets it for every command there (it was ignored:
    found by tests/test_harbor_parity.py, task environment-env); a ${VAR}, which Harbor reads from the host, is
    refused: no host variable enters a sandbox."""
    write_task(tmp_path / "set", "t", app_dockerfile("some-base:1"), toml='[environment.env]\nGREETING = "hi"\n')
    (task,) = load_dataset(f"harbor:{tmp_path / 'set'}").instances
    run = {"network": "none", "memory": "2g", "cpus": 1.0, "disk": "2g"}
    assert task.env == {"GREETING": "hi"} and task.resources(run)["env"] == {"GREETING": "hi"}
    folder = write_task(tmp_path / "host", "t", app_dockerfile("some-base:1"),
                        toml='[environment.env]\nKEY = "${OPENAI_API_KEY}"\n[verifier.env]\nJ = "${HOME:-x}"\n')
    with pytest.raises(InputError) as refused:
        load_dataset(f"harbor:{tmp_path / 'host'}")
    for where in ("environment.env KEY", "verifier.env J"):
        assert f"task {folder.resolve()}: task.toml: {where}: a ${{VAR}} is read from the host" in str(refused.value)


def test_a_tasks_workdir_is_where_its_sandbox_starts_and_a_relative_one_is_refused(tmp_path):
    """[environment] workdir overrides the image's WORKDIR in Harbor (every command runs there); it was refused here
    unless the Dockerfile's own (found by the parity test, task workdir-override): now it is the sandbox's working
    directory (SandboxSpec.workdir), a relative one refused."""
    write_task(tmp_path / "other", "t", app_dockerfile("some-base:1"), toml='[environment]\nworkdir = "/srv/task"\n')
    (task,) = load_dataset(f"harbor:{tmp_path / 'other'}").instances
    run = {"network": "none", "memory": "2g", "cpus": 1.0, "disk": "2g"}
    assert task.workdir == "/srv/task" and task.resources(run)["workdir"] == "/srv/task"
    folder = write_task(tmp_path / "relative", "t", app_dockerfile("some-base:1"),
                        toml='[environment]\nworkdir = "srv"\n')
    with pytest.raises(InputError, match=re.escape(f"task {folder.resolve()}: task.toml: environment.workdir 'srv' "
                                                   "is no absolute path")):
        load_dataset(f"harbor:{tmp_path / 'relative'}")


def test_the_cli_refuses_a_broken_task_with_exit_2(tmp_path):
    folder = write_task(tmp_path / "set", "broken", app_dockerfile("some-base:1"), instruction=None)
    proc = harness("run", "--dataset", f"harbor:{tmp_path / 'set'}", "--agent", "oracle", "--model", "replay",
                   "--scorer", "harbor", "--output-dir", tmp_path / "out")
    assert proc.returncode == 2 and f"task {folder.resolve()}: no instruction.md" in proc.stderr, explain(proc)


def test_the_base_images_of_a_dockerfile():
    from harness.sandbox.docker.task_images import bases

    dockerfile = """# a comment
ARG BASE=debian:12
ARG OTHER
FROM --platform=linux/amd64 ${BASE} AS build
RUN make \\
    all
FROM build AS test
FROM scratch
FROM $OTHER
FROM python:3.12-slim
COPY --from=build /out /out
"""
    assert bases(dockerfile) == ["debian:12", "python:3.12-slim"]  # $OTHER has no default: the build says


@pytest.mark.parametrize("verdict, correct, value", [
    ({"reward": 1.0, "source": "reward.txt"}, True, 1.0),
    ({"reward": 0.5, "source": "reward.json", "rewards": {"reward": 0.5}}, False, 0.5),
    ({"reward": 0.0, "source": "reward.txt"}, False, 0.0),
])
def test_the_harbor_scorer_reads_the_verifiers_reward(verdict, correct, value):
    score = HarborScorer().score(None, "1", context=ScoreContext(verdicts={"harbor": verdict}))
    assert (score.correct, score.value) == (correct, value)
    assert HarborScorer(threshold=0.5).score(None, "1", context=ScoreContext(verdicts={"harbor": verdict})).correct \
        is (value >= 0.5)


@pytest.mark.parametrize("verdicts", [{}, {"harbor": {"error": "the verifier wrote no reward", "exit_code": 1}}])
def test_a_verifier_that_gave_no_reward_is_not_judged(verdicts):
    with pytest.raises(ScorerError):
        HarborScorer().score(None, "1", context=ScoreContext(verdicts=verdicts))


class RewardFiles:
    """/logs/verifier's files as Sandbox.read_file gives them, for the reading of a reward alone (pure logic)."""

    def __init__(self, files: dict[str, str | bytes]):
        self.files = {f"{REWARDS}/{name}": text if isinstance(text, bytes) else text.encode()
                      for name, text in files.items()}

    def read_file(self, path: str, *, max_bytes: int = DEFAULT_MAX_READ) -> bytes:
        if path not in self.files:
            raise SandboxFileNotFound(path)
        if len(self.files[path]) > max_bytes:
            raise SandboxOutputLimit(f"{path} is larger than {max_bytes} bytes")
        return self.files[path]


@pytest.mark.parametrize("files, read", [
    ({"reward.txt": "1\n"}, 1.0), ({"reward.txt": " .5\n"}, 0.5), ({"reward.txt": "1e-05"}, 1e-05),
    ({"reward.txt": "2"}, 2.0), ({"reward.txt": "-0.5"}, -0.5),  # Harbor bounds no reward: the scorer clamps
    ({"reward.json": '{"reward": 0.25, "tests_passed": 3}'}, 0.25),
    ({"reward.json": '{"reward": true, "checks": 2}'}, 1.0),  # a JSON true is 1 in Harbor 0.25
    ({"reward.json": '{"accuracy": 1}', "reward.txt": "0"}, 1.0),  # the JSON first, as Harbor
])
def test_a_reward_is_a_finite_number_as_harbor_reads_it(files, read):
    found = reward(RewardFiles(files))
    assert found["reward"] == read and isinstance(found["reward"], float)


@pytest.mark.parametrize("files, says", [
    ({"reward.txt": "1_0"}, "'1_0', not a number"),  # float() reads 10
    ({"reward.txt": "nan"}, "not a number"), ({"reward.txt": "inf"}, "not a number"),
    ({"reward.txt": "0x1"}, "not a number"), ({"reward.txt": "1e999"}, "not a finite number"),
    ({"reward.json": '{"reward": NaN}'}, "NaN is not a finite number"),
    ({"reward.json": '{"reward": 1e999}'}, "inf, not a finite number"),
    ({"reward.json": '{"reward": 1' + "0" * 400 + "}"}, "not a finite number"),  # an int past a float's range
    ({"reward.json": '{"reward": 1, "note": "fine"}'}, "'fine', not a number"),  # Harbor refuses it too
    ({"reward.json": '"1"'}, "'\"1\"', not an object of rewards"),
    ({"reward.json": "1"}, "'1', not an object of rewards"),  # Harbor 0.25 reads no reward from a bare number
    ({"reward.json": json.dumps({"reward": 1, **{f"k{i}": 0 for i in range(64)}})}, "65 values: at most 64"),
    ({"reward.json": json.dumps({"reward": 1, "pad": 0, "x" * 201: 0})}, "at most 200 characters"),
    ({"reward.json": json.dumps({"reward": 1, "pad": [0] * 20_000_000})}, "larger than 65536 bytes"),  # 40 MB
])
def test_a_reward_that_is_no_finite_number_or_too_big_is_refused(files, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        reward(RewardFiles(files))


def test_a_reward_beyond_0_1_is_kept_in_the_verdict_its_value_clamped_and_the_mean_score_stays():
    """Harbor 0.25 takes any finite reward: the verdict keeps it, the score's value is clamped to [0, 1]; the report's
    mean score and epochs mean were null (an overflowing sum) or broken (a mean over 1) by rewards past 1."""
    scorer = HarborScorer()
    verdicts = [{"reward": 2.0, "source": "reward.txt"}, {"reward": 1e308, "source": "reward.txt"},
                {"reward": 1e308, "source": "reward.txt"}, {"reward": -3.0, "source": "reward.txt"},
                {"reward": 0.5, "source": "reward.json", "rewards": {"reward": 0.5, "extra": 9.0}}]
    scores = [scorer.score(None, "1", context=ScoreContext(verdicts={"harbor": v})) for v in verdicts]
    assert [(s.value, s.correct) for s in scores] == [(1.0, True), (1.0, True), (1.0, True), (0.0, False),
                                                      (0.5, False)]
    assert scores[0].details["reward"] == 2.0 and "counted as 1 (a score is in [0, 1])" in scores[0].explanation
    assert all("rewards" not in s.details for s in scores)  # reward.json's values: in the verdict alone
    rows = [ResultRow(instance_id=f"t{i // 2}", epoch=1 + i % 2, status="ok", correct=s.correct,
                      scores={"harbor": s.model_dump()}, verdicts={"harbor": v})
            for i, (s, v) in enumerate(zip(scores + scores[:1], verdicts + verdicts[:1], strict=True))]
    for epochs, ids in ((1, [r.instance_id for r in rows]), (2, ["t0", "t1", "t2"])):
        found = build_report(rows if epochs == 2 else [r.model_copy(update={"epoch": 1, "instance_id": f"u{i}"})
                                                       for i, r in enumerate(rows)],
                             ids if epochs == 2 else [f"u{i}" for i in range(len(rows))], leaked_containers=0,
                             epochs=epochs, reducers=["mean"])
        stats = json.loads(found.model_dump_json())["scorers"]["harbor"]
        assert stats["mean_score"] == pytest.approx(4.5 / 6 if epochs == 1 else 4.5 / 6), stats


@pytest.mark.parametrize("reward", ["1_0", "nan", float("nan"), float("inf"), True, None])
def test_a_verdicts_reward_that_is_no_finite_number_is_not_judged(reward):
    """A row's verdict is read again by `harness score`: float("1_0") was 10."""
    with pytest.raises(ScorerError, match="not a finite number"):
        HarborScorer().score(None, "1", context=ScoreContext(verdicts={"harbor": {"reward": reward}}))


# ---------------------------------------------------------------- real images, real sandboxes

@pytest.fixture(scope="module")
def python_base(provider, image):
    with python_task_base() as made:
        yield made


@contextmanager
def python_task_base() -> Iterator[tuple[str, str, list[Path]]]:
    """A task base with python3: the harness's offline Debian base (as the harness finds or builds it) plus Debian's
    python3, tagged for its user alone; every task image built from it (the contexts put in the list it yields
    with the tag and the base) is removed after."""
    from harness.sandbox.docker import images

    base = images._ensure_base(lambda m: None)
    tag = f"harness-test-harbor-py:{secrets.token_hex(4)}"
    build = subprocess.run(["docker", "build", "-q", "-t", tag, "-"], capture_output=True, text=True, timeout=600,
                           input=f"FROM {base}\nRUN apt-get update && apt-get install -y --no-install-recommends "
                                 "python3 && rm -rf /var/lib/apt/lists/*\n")
    assert build.returncode == 0, build.stderr
    made: list[Path] = []
    try:
        yield tag, base, made
    finally:
        from harness.sandbox.docker.task_images import task_tag

        for context in made:
            if context.is_dir():
                subprocess.run(["docker", "rmi", task_tag(context), f"harness-taskenv:{tree_hash(context)}"],
                               capture_output=True, timeout=120)
        subprocess.run(["docker", "rmi", tag], capture_output=True, timeout=120)


@pytest.mark.docker
def test_the_oracle_passes_every_task_and_a_wrong_agent_fails_each(tmp_path, out, python_base):
    py, _, made = python_base
    tasks = tmp_path / "tasks"
    for name, reward_json in (("hello", False), ("hello-json", True)):
        test_sh = TEST_SH.replace("echo 1 > /logs/verifier/reward.txt", 'echo \'{"reward": 1}\' > /logs/verifier/'
                                  'reward.json').replace("echo 0 > /logs/verifier/reward.txt", 'echo \'{"reward": 0}\' '
                                  '> /logs/verifier/reward.json') if reward_json else TEST_SH
        made.append(write_task(tasks, name, app_dockerfile(py), test_sh=test_sh) / "environment")
    wrong = [{"tool_calls": [{"name": "run_shell", "arguments": {
        "command": "echo goodbye > /app/answer.txt; ls -A /tests /solution; cat /app/seed.txt"}}]},
             {"content": "<solution>done</solution>"}]
    (tasks / "replay.jsonl").write_text("".join(json.dumps({"instance_id": n, "turns": wrong}) + "\n"
                                                for n in ("hello", "hello-json")))
    # The natural command, no --scorer: Harbor's own (before: GAIA's judged 'done' against 'pass', 0 %, exit 0).
    oracle = harness("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--output-dir", out)
    assert oracle.returncode == 0, explain(oracle)
    assert json.loads((out / "run.json").read_text())["scorers"] == ["harbor"]
    got = {r["instance_id"]: r for r in rows(out)}
    assert sorted(got) == ["hello", "hello-json"] and all(r["correct"] is True for r in got.values()), got
    assert got["hello"]["verdicts"]["harbor"]["source"] == "reward.txt"
    assert got["hello-json"]["verdicts"]["harbor"]["source"] == "reward.json"

    # The same wrong work by each kind of runner: the plain one, an AutoGen agent, a program inside the sandbox.
    for agent in ("plain", "assistant", f"sandbox:python3 @{SANDBOXED}"):
        wrong_out = out_dir(tmp_path)
        try:
            run = harness("run", "--dataset", f"harbor:{tasks}", "--agent", agent, "--model", "replay",
                          "--scorer", "harbor", "--output-dir", wrong_out)
            assert run.returncode == 0, explain(run)  # wrong work is the agent's result, not the run's failure
            failed = rows(wrong_out)
            assert len(failed) == 2 and all(r["status"] == "ok" and r["correct"] is False for r in failed), failed
            assert all(r["verdicts"]["harbor"]["reward"] == 0 for r in failed), (agent, failed)
            if agent == "plain":  # neither the tests nor the solution are in the sandbox while the agent works
                shown = next(e["content"] for e in trace(wrong_out, failed[0]) if e["type"] == "tool_result")
                assert shown.split("stdout:\n", 1)[1].startswith("/solution:\n\n/tests:\nseeded"), shown
        finally:
            assert remove_leftovers(wrong_out) == [], "containers left behind"


@pytest.mark.docker
def test_a_task_whose_base_is_missing_is_refused_before_any_container(tmp_path, out, python_base):
    _, base, made = python_base
    missing = f"harness-test-no-such-base:{secrets.token_hex(4)}"
    tasks = tmp_path / "tasks"
    fine = write_task(tasks, "fine", app_dockerfile(python_base[0], "# fine, but not built\n")) / "environment"
    made.append(fine)
    folder = write_task(tasks, "needs-registry", app_dockerfile(missing))
    no_turns(tasks, "fine", "needs-registry")
    proc = harness("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--model", "replay",
                   "--scorer", "harbor", "--output-dir", out)
    assert proc.returncode == 2, explain(proc)
    assert f"task {folder.resolve()}" in proc.stderr and missing in proc.stderr, explain(proc)
    assert not (out / "output.jsonl").exists() and containers_of(out) == []
    built = subprocess.run(["docker", "image", "inspect", f"harness-taskenv:{tree_hash(fine)}"], capture_output=True)
    assert built.returncode != 0, "the fine task's image was built before the missing base was found"

    bare = write_task(tmp_path / "bare", "no-python", app_dockerfile(base))  # the base alone has no python3
    made.append(bare / "environment")
    no_turns(tmp_path / "bare", "no-python")
    proc = harness("run", "--dataset", f"harbor:{tmp_path / 'bare'}", "--agent", "oracle", "--model", "replay",
                   "--scorer", "harbor", "--output-dir", out_dir(tmp_path))
    assert proc.returncode == 2 and f"task {bare.resolve()}: its image has no python3" in proc.stderr, explain(proc)


@pytest.mark.docker
def test_limits_and_the_network_policy_hold_inside_a_tasks_own_image(tmp_path, provider, run_id, python_base):
    from harness.benchmarks.harbor.environment import reward
    from harness.sandbox.docker import storage

    context = write_task(tmp_path, "limits", app_dockerfile(python_base[0])) / "environment"
    python_base[2].append(context)
    tag = provider.image_of(str(context), log=lambda m: None)
    assert provider.image_of(str(context), log=lambda m: None) == tag  # built once: the tag is there
    spec = SandboxSpec(image=tag, run_id=run_id, instance_id="limits", memory="256m", cpus=0.5, disk="128m",
                       network="none")
    with provider.open(spec) as sandbox:
        probe = sandbox.python(
            "import os, socket\n"
            "cg = '/sys/fs/cgroup'\n"
            "print(open(cg + '/memory/memory.limit_in_bytes').read().strip())\n"
            "print(int(open(cg + '/cpu/cpu.cfs_quota_us').read()) / int(open(cg + '/cpu/cpu.cfs_period_us').read()))\n"
            "print(sorted(os.listdir('/sys/class/net')))\n"
            "s = socket.socket(); s.settimeout(3)\n"
            "try:\n    s.connect(('1.1.1.1', 80)); print('reached')\n"
            "except OSError as exc:\n    print('unreachable', type(exc).__name__)\n"
            "print(os.getuid(), os.getcwd())\n", cwd="/app")
        assert probe.ok, probe
        memory, cpus, nets, net, who = probe.stdout.splitlines()
        on_tmpfs = storage.task_places(tag) is not None and storage.backend(tag, "128m").kind == "tmpfs"
        assert int(memory) == 256 * 2**20 + (128 * 2**20 if on_tmpfs else 0)
        assert float(cpus) == 0.5 and nets == "['lo']" and net.startswith("unreachable"), probe.stdout
        assert who == "0 /app"  # the task's own user (root) and working directory
        files = sandbox.shell("cat /app/seed.txt && echo more > /app/new.txt && touch /etc/harness-x", cwd="/")
        assert files.stdout.startswith("seeded") and "Read-only file system" in files.stderr, files
        fill = sandbox.shell("head -c 200M /dev/zero > /app/big", cwd="/")
        assert not fill.ok and "No space left" in fill.stderr, fill
        # The reward as Harbor reads it: reward.json first, else reward.txt; none, or no number, is no reward.
        for files, expected in ((["reward.json:{\"reward\": 0.25}"], 0.25),
                                (["reward.txt:1", "reward.json:{\"reward\": 0}"], 0.0),
                                (["reward.txt:1", "reward.json:0"], "not an object of rewards"),  # as Harbor 0.25
                                (["reward.txt:1"], 1.0),
                                (["reward.json:{\"pass\": 0.5}"], 0.5), ([], "wrote no"),
                                (["reward.txt:abc"], "not a number"),
                                (["reward.json:{}"], "holds no value")):
            writes = "".join(f"echo {shlex.quote(f.split(':', 1)[1])} > /logs/verifier/{f.split(':', 1)[0]}; "
                             for f in files)
            assert sandbox.shell(f"rm -rf /logs/verifier && mkdir -p /logs/verifier && {writes}true", cwd="/").ok
            if isinstance(expected, float):
                assert reward(sandbox)["reward"] == expected, files
            else:
                with pytest.raises(ValueError, match=expected):
                    reward(sandbox)


# ---------------------------------------------------------------- the task's working directory


def test_a_handle_carries_the_sandboxs_working_directory():
    from harness.sandbox.contract import SandboxHandle

    spec = SandboxSpec(image="i", run_id="r", instance_id="x")
    handle = SandboxHandle(provider="docker", name="s", host="h", port=1, token="t", spec=spec, workdir="/app")
    assert SandboxHandle.model_validate_json(handle.model_dump_json()).workdir == "/app"
    older = json.loads(handle.model_dump_json())
    del older["workdir"]  # a handle written before it carried one: the workspace
    assert SandboxHandle.model_validate(older).workdir == "/workspace"


def test_the_code_tools_name_the_sandboxs_working_directory(tmp_path):
    from harness.agents.dry import DrySandbox
    from harness.environments.families import environments
    from harness.environments.family import Setup
    from harness.environments.tools import offered
    from harness.traces import Tracer

    class AtApp(DrySandbox):
        workdir = "/app"

    folder = write_task(tmp_path / "set", "hello", app_dockerfile("some-base:1"))
    task = load_dataset(f"harbor:{folder}").instances[0]
    for sandbox, where, instance in ((DrySandbox(), "/workspace", None), (AtApp(), "/app", task)):
        envs = environments(Setup(sandbox, Tracer(None), command_timeout=10, page_size=100, instance=instance))
        tools = {fn.__name__: fn.__doc__ for fn in offered(envs, instance)}
        assert f"working directory {where}" in tools["run_shell"] and f"working directory {where}" in tools[
            "run_python"], tools
        assert ("pandas" in tools["run_python"]) is (instance is None)  # a task's own image has no toolbox of ours


@pytest.mark.docker
def test_a_sandbox_starts_in_its_images_working_directory(tmp_path, provider, run_id, image, python_base):
    """A task's own image: its WORKDIR (/app), through a handle too; the sandbox image: /workspace."""
    context = write_task(tmp_path, "at-app", app_dockerfile(python_base[0])) / "environment"
    python_base[2].append(context)
    tag = provider.image_of(str(context), log=lambda m: None)
    for img, where in ((tag, "/app"), (image, "/workspace")):
        with provider.open(SandboxSpec(image=img, run_id=run_id, instance_id="wd")) as sandbox:
            attached = provider.attach(sandbox.handle())
            try:
                assert sandbox.workdir == attached.workdir == where
                for box in (sandbox, attached):
                    ran = box.shell("pwd && echo x > rel.txt")
                    assert ran.ok and ran.stdout == where + "\n", ran
                    assert box.python("import os; print(os.getcwd())").stdout == where + "\n"
                assert sandbox.read_file(f"{where}/rel.txt") == b"x\n"
                assert sandbox.shell("pwd", cwd="/tmp").stdout == "/tmp\n"  # a cwd given still wins
            finally:
                attached.close()


@pytest.mark.docker
def test_an_agent_works_in_the_tasks_working_directory(tmp_path, python_base):
    """A replayed agent's `pwd` prints /app and its relative write lands there (the verifier finds it), for the plain
    runner and for a command run inside the sandbox."""
    tasks = tmp_path / "tasks"
    python_base[2].append(write_task(tasks, "hello", app_dockerfile(python_base[0])) / "environment")
    turns = [{"tool_calls": [{"name": "run_shell", "arguments": {"command": "pwd; echo hello > answer.txt"}}]},
             {"content": "<solution>done</solution>"}]
    (tasks / "replay.jsonl").write_text(json.dumps({"instance_id": "hello", "turns": turns}) + "\n")
    # The last: a CLI agent whose output has no <solution> runs once (no simulated user on Harbor): before, it ran
    # four times on the one sandbox, answer.txt held four lines and the verifier failed it.
    for agent in ("plain", "sandbox:echo hello > answer.txt && echo \"<solution>$(pwd)</solution>\"",
                  "sandbox:echo hello >> answer.txt"):
        out = out_dir(tmp_path)
        try:
            run = harness("run", "--dataset", f"harbor:{tasks}", "--agent", agent, "--model", "replay",
                          "--output-dir", out)
            assert run.returncode == 0, explain(run)
            [row] = rows(out)
            assert row["status"] == "ok" and row["correct"] is True, row  # the verifier read /app/answer.txt
            assert row["user_replies"] == 0, row
            if agent == "plain":
                events = trace(out, row)
                shown = next(e["content"] for e in events if e["type"] == "tool_result")
                assert shown.split("stdout:\n", 1)[1].startswith("/app\n"), shown
                system = next(e["content"] for e in events if e["type"] == "system_prompt")
                assert "/app" in system and "/workspace" not in system, system
                assert "/workspace" not in next(e["task"] for e in events if e["type"] == "task"), events
            elif "solution" in agent:
                assert row["answer"] == "/app", row
        finally:
            assert remove_leftovers(out) == [], "containers left behind"


@pytest.mark.docker
def test_rewards_written_by_real_verifiers_are_finite_numbers_bounded_and_kept_once(tmp_path, out, python_base):
    """Verifiers in real sandboxes: `1_0` in reward.txt was a reward of 10; a 40 MB reward.json was kept twice per
    row (verdict and score: 80 MB of output.jsonl, as much in report.html); a reward of 2 is kept, its score 1."""
    py, _, made = python_base
    tasks = tmp_path / "tasks"
    writes = {"underscore": "echo 1_0 > /logs/verifier/reward.txt",
              "huge": "python3 -c 'import json; print(json.dumps({\"reward\": 1, \"pad\": [0] * 20000000}))' "
                      "> /logs/verifier/reward.json",
              "two": "echo '{\"reward\": 2, \"tests_passed\": 3}' > /logs/verifier/reward.json"}
    for name, write in writes.items():
        made.append(write_task(tasks, name, app_dockerfile(py), test_sh=f"#!/bin/bash\n{write}\n") / "environment")
    no_turns(tasks, *writes)
    proc = harness("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--model", "replay",
                   "--scorer", "harbor", "--output-dir", out)
    assert proc.returncode == 3, explain(proc)  # two rows not judged
    html = harness("report", out, "--html")
    assert html.returncode == 0, explain(html)
    got = {r["instance_id"]: r for r in rows(out)}
    assert got["underscore"]["correct"] is None and "'1_0', not a number" in got["underscore"]["verdicts"]["harbor"][
        "error"], got["underscore"]
    assert got["huge"]["correct"] is None and "larger than 65536 bytes" in got["huge"]["verdicts"]["harbor"]["error"]
    two = got["two"]
    assert two["correct"] is True and two["scores"]["harbor"]["value"] == 1.0, two
    assert two["verdicts"]["harbor"]["rewards"] == {"reward": 2.0, "tests_passed": 3.0}
    assert two["scores"]["harbor"]["details"]["reward"] == 2.0 and "rewards" not in two["scores"]["harbor"]["details"]
    assert (out / "output.jsonl").stat().st_size < 100_000 and (out / "report.html").stat().st_size < 2_000_000
    report = json.loads((out / "report.json").read_text())
    assert report["scorers"]["harbor"]["mean_score"] == 1.0, report["scorers"]["harbor"]


@pytest.mark.docker
def test_a_tasks_scripts_run_by_their_interpreter_line_as_harbor_runs_them(tmp_path, out, python_base):
    """Harbor 0.25 makes solve.sh and test.sh executable and runs them as programs: a `#!/usr/bin/env python3` script
    is Python, one without a `#!` line is bash. They were run as `bash SCRIPT`: a Python verifier was a bash syntax
    error, no reward (found by tests/test_harbor_parity.py, task shebang-scripts)."""
    py, _, made = python_base
    tasks = tmp_path / "tasks"
    python_test = ("#!/usr/bin/env python3\nfrom pathlib import Path\nok = Path('/app/answer.txt').read_text() == "
                   "'hello\\n'\nPath('/logs/verifier/reward.txt').write_text(str(int(ok)))\n")
    python_solve = "#!/usr/bin/env python3\nopen('/app/answer.txt', 'w').write('hello\\n')\n"
    made.append(write_task(tasks, "python", app_dockerfile(py), test_sh=python_test, solve_sh=python_solve)
                / "environment")
    made.append(write_task(tasks, "no-shebang", app_dockerfile(py), test_sh=TEST_SH.removeprefix("#!/bin/bash\n"),
                           solve_sh=SOLVE_SH.removeprefix("#!/bin/bash\n")) / "environment")
    proc = harness("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--output-dir", out)
    assert proc.returncode == 0, explain(proc)
    got = {r["instance_id"]: r["verdicts"]["harbor"] for r in rows(out)}
    assert got == {"python": {**got["python"], "reward": 1.0}, "no-shebang": {**got["no-shebang"], "reward": 1.0}}, got


@pytest.mark.docker
def test_an_agent_out_of_time_is_still_judged_on_what_it_left_as_harbor_does(tmp_path, out, python_base):
    """Harbor 0.25 runs the verifier after an agent timeout (its trial records AgentTimeoutError, then verifies). Past
    the task's [agent] timeout_sec the row was a `wall_time` limit with no verdict (found by the parity test, task
    timeout-after-work): now it keeps the limit and the verifier's reward, its processes ended first."""
    py, _, made = python_base
    tasks = tmp_path / "tasks"
    toml = TOML.replace("[agent]\ntimeout_sec = 120.0", "[agent]\ntimeout_sec = 4.0")
    made.append(write_task(tasks, "late", app_dockerfile(py), toml=toml, solve_sh=SOLVE_SH + "sleep 600\n")
                / "environment")
    proc = harness("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--output-dir", out)
    (row,) = rows(out)
    assert row["limit"] == "wall_time" and row["verdicts"]["harbor"]["reward"] == 1.0, explain(proc)
    assert row["duration_s"] < 60, row  # the sleep was ended with the agent's other processes


@pytest.mark.docker
def test_a_tasks_environment_variables_reach_the_agent_and_the_verifier(tmp_path, out, python_base):
    """[environment] env, as Harbor gives it to every command in the task's environment: the oracle's solve.sh and
    the verifier see it (both ran without it: the verifier's reward was 0)."""
    py, _, made = python_base
    tasks = tmp_path / "tasks"
    test_sh = TEST_SH.replace('= hello ]', '= "$GREETING" ] && [ "$GREETING" = hello ]')
    made.append(write_task(tasks, "env", app_dockerfile(py), toml=TOML + '[environment.env]\nGREETING = "hello"\n',
                           test_sh=test_sh, solve_sh='#!/bin/bash\necho "$GREETING" > /app/answer.txt\n')
                / "environment")
    proc = harness("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--output-dir", out)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["verdicts"]["harbor"]["reward"] == 1.0, row


@pytest.mark.docker
def test_a_task_installs_anywhere_and_runs_in_its_workdir_while_disk_still_holds(tmp_path, out, python_base):
    """As in Harbor's containers: a solution installing into /usr/local/bin passes (it failed on a read-only root:
    found by the parity test, task outside-workdir), and [environment] workdir is where the oracle's solve.sh and the
    verifier run (the task was refused: task workdir-override). A solution writing beyond --disk outside its tmpfs
    places ends as the `disk` limit (diskwatch.py) and leaves nothing behind."""
    py, _, made = python_base
    tasks = tmp_path / "tasks"
    dockerfile = app_dockerfile(py, "RUN mkdir -p /srv/task && chmod 777 /srv/task\n")  # one image for the three
    toml = TOML.replace("timeout_sec = 120.0", "timeout_sec = 60.0")
    check = "#!/bin/bash\nmkdir -p /logs/verifier\nif {}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    made.append(write_task(tasks, "install", dockerfile, toml=toml, test_sh=check.format('[ "$(greet)" = hello ]'),
                           solve_sh="#!/bin/bash\nprintf '#!/bin/sh\\necho hello\\n' > /usr/local/bin/greet\n"
                                    "chmod +x /usr/local/bin/greet\n") / "environment")
    write_task(tasks, "workdir", dockerfile, toml=toml + 'workdir = "/srv/task"\n',
               test_sh=check.format('[ "$(pwd)" = /srv/task ] && [ "$(cat answer.txt)" = done ]'),
               solve_sh="#!/bin/bash\necho done > answer.txt\n")
    write_task(tasks, "flood", dockerfile, toml=toml, test_sh=check.format("true"),
               solve_sh="#!/bin/bash\nhead -c 200M /dev/zero > /opt/big\nsleep 120\n")
    proc = harness("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--disk", "128m", "--output-dir", out)
    try:
        got = {r["instance_id"]: r for r in rows(out)}
        assert got["install"]["verdicts"]["harbor"]["reward"] == 1.0, explain(proc)
        assert got["workdir"]["verdicts"]["harbor"]["reward"] == 1.0, explain(proc)
        flood = got["flood"]
        assert flood["status"] == "limit" and flood["limit"] == "disk" and flood["attempt"] == 1, flood
        assert flood["duration_s"] < 60, flood  # ended by the watcher, not at the task's time limit
        limit = [e for e in trace(out, flood) if e["type"] == "limit"]
        assert [e["limit"] for e in limit] == ["disk"] and "--disk" in limit[0]["detail"], limit
    finally:
        assert remove_leftovers(out) == [], "containers left behind"
