"""Harbor's task schema 1.4 as Harbor 0.25 runs it (issue 39 item 1): a separate verifier in a fresh container of
the task's image seeded with the declared artifacts only, artifacts collected into the run directory, `[agent]` and
`[verifier]` users, reward.json with several keys, healthchecks. The task folders are tests/data/harbor_tasks/
(Harbor's oracle scores each 1.0); real containers, one oracle run over all of them and one hostile run."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.benchmarks.harbor.environment import reward
from harness.datasets import load_dataset
from harness.errors import InputError
from harness.sandbox.docker import task_images
from tests.helpers.e2e import explain, harness, out_dir, remove_leftovers, rows
from tests.test_harbor import python_task_base

DATA = Path(__file__).parent / "data" / "harbor_tasks"
FEATURES = ("artifacts", "healthcheck", "reward_json", "separate_verifier", "users")


def copy_tasks(target: Path, base: str, *names: str) -> Path:
    """The data's task folders under `target`, their images FROM `base` (a Debian with python3) instead."""
    for name in names:
        shutil.copytree(DATA / name, target / name)
        for dockerfile in (target / name).glob("*/Dockerfile"):  # environment/'s, and a verifier image's tests/'s
            dockerfile.write_text(dockerfile.read_text().replace("FROM debian:bookworm-slim", f"FROM {base}"))
    return target


@pytest.fixture(scope="module")
def python_base(provider, image):
    with python_task_base() as made:
        yield made


# ---------------------------------------------------------------- the task format, without an engine

def test_each_feature_loads_as_harbor_resolves_it():
    got = {i.instance_id: i for i in load_dataset(f"harbor:{DATA}").instances}
    assert set(FEATURES) <= set(got)  # beside the multi-step and MCP folders (test_harbor_steps.py, test_harbor_mcp.py)
    assert got["artifacts"].judge_sandbox is None and got["reward_json"].judge_sandbox is None  # shared mode
    assert got["separate_verifier"].judge_sandbox is not None and got["separate_verifier"].judge_sandbox.user is None
    users = got["users"]
    assert (users.user, users.judge_sandbox.user if users.judge_sandbox else "-") == ("worker", "checker")
    assert got["healthcheck"].metadata["healthcheck"]["retries"] == 3


def _task(tmp_path: Path, toml: str) -> Path:
    folder = tmp_path / "t"
    shutil.copytree(DATA / "reward_json", folder)
    (folder / "task.toml").write_text(toml)
    return folder


@pytest.mark.parametrize("toml, network, resources", [
    ('[verifier.environment]\ncpus = 2\nmemory = "1G"\n', None, (2, "1g")),  # an environment implies separate
    ('[environment]\nnetwork_mode = "no-network"\n[verifier]\nenvironment_mode = "separate"\n', "none", (None, None)),
    ('[verifier]\nenvironment_mode = "separate"\nnetwork_mode = "no-network"\n', "none", (None, None)),
])
def test_the_separate_verifiers_sandbox_is_its_environments(tmp_path, toml, network, resources):
    judge = load_dataset(f"harbor:{_task(tmp_path, toml)}").instances[0].judge_sandbox
    assert judge is not None and (judge.network, (judge.cpus, judge.memory)) == (network, resources)


@pytest.mark.parametrize("toml, says", [
    ('[verifier]\nuser = "checker"\n', "[verifier] user 'checker' and [agent] user None differ"),
    ('[agent]\nuser = 1500\n', "[verifier] user None and [agent] user 1500 differ"),
    ('[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ncpus = 1\n', "name one mode"),
    ('artifacts = ["app/x"]\n', "artifacts[0]: source 'app/x' is not an absolute path"),
    ('artifacts = ["/app/../etc"]\n', "has a '..' component"),
    ('artifacts = [{source = "/x", destination = "../y"}]\n', "destination '../y' is not a relative path"),
    ('artifacts = [{source = "/x", service = "db"}]\n', "service 'db': an artifact of another compose service"),
    ('[[verifier.collect]]\ncommand = "true"\n', "[[verifier.collect]] hooks are not supported"),
])
def test_what_cannot_run_as_harbor_runs_it_is_refused_naming_it(tmp_path, toml, says):
    with pytest.raises(InputError) as caught:
        load_dataset(f"harbor:{_task(tmp_path, toml)}")
    assert says in str(caught.value), caught.value


def test_a_verifier_image_of_its_own_resolves_as_harbors(tmp_path):
    """Harbor 0.25's precedence: [verifier.environment] docker_image, else a tests/Dockerfile (its build context
    tests/), else the task's image; the build within the task's [environment] build_timeout_sec (Harbor's bound of
    the verifier's start too). A tests/docker-compose.yaml alone (several containers) is refused. Before: each was
    refused."""
    folder = _task(tmp_path, '[verifier]\nenvironment_mode = "separate"\n[environment]\nbuild_timeout_sec = 30\n')
    assert load_dataset(f"harbor:{folder}").instances[0].judge_sandbox.image is None  # the task's
    (folder / "tests" / "Dockerfile").write_text("FROM some-base:1\nCOPY . /tests/\n")
    task = load_dataset(f"harbor:{folder}").instances[0]
    judge = task.judge_sandbox
    assert (judge.image, judge.build_timeout) == (str((folder / "tests").resolve()), 30), judge
    assert task.metadata["verifier_image"] is True
    (folder / "task.toml").write_text('[verifier.environment]\ndocker_image = "x:1"\nbuild_timeout_sec = 9\n'
                                   '[environment]\nbuild_timeout_sec = 8\n')
    judge = load_dataset(f"harbor:{folder}").instances[0].judge_sandbox
    assert (judge.image, judge.build_timeout) == ("engine-image:x:1", 8), judge
    (folder / "tests" / "Dockerfile").unlink()
    (folder / "tests" / "docker-compose.yaml").write_text("services: {}\n")
    assert load_dataset(f"harbor:{folder}").instances[0].judge_sandbox.image == "engine-image:x:1"
    (folder / "task.toml").write_text('[verifier]\nenvironment_mode = "separate"\n')
    with pytest.raises(InputError, match="tests/ holds a docker-compose.yaml: a verifier environment of several"):
        load_dataset(f"harbor:{folder}")


def test_the_same_user_for_both_phases_runs_shared(tmp_path):
    folder = _task(tmp_path, '[agent]\nuser = "worker"\n[verifier]\nuser = "worker"\n')
    loaded = load_dataset(f"harbor:{folder}")
    assert loaded.instances[0].user == "worker" and loaded.instances[0].judge_sandbox is None
    from harness.benchmarks.harbor import verifier_mode

    assert verifier_mode.user(1500) == "1500"


def test_a_separate_verifiers_task_builds_its_tools_before_any_sandbox():
    """The preflight builds the agent's tools over no sandbox (harness/agents/dry.py), with the first instance."""
    from harness.agents.contract import Limits
    from harness.agents.dry import dry_environments
    from harness.benchmarks.harbor.family import Harbor

    task = next(i for i in load_dataset(f"harbor:{DATA}").instances if i.instance_id == "separate_verifier")
    env = dry_environments(Limits(), instance=task).of(Harbor)
    assert env is not None and env.separate and env.judge is None  # before: a HarnessError


class Checked:
    """A sandbox whose healthcheck command fails `fails` times, then passes (pure logic: the loop's counting)."""

    def __init__(self, fails: int):
        self.fails, self.calls = fails, 0

    def shell(self, command: str, **kwargs):
        from harness.sandbox.contract import ExecResult

        self.calls += 1
        return ExecResult(exit_code=0 if self.calls > self.fails else 1, stdout="", stderr="down")

    def read_file(self, path: str, **kwargs):
        from harness.errors import SandboxFileNotFound

        raise SandboxFileNotFound(path)

    def handle(self):  # no [environment] workdir: the image's
        from harness.sandbox.contract import SandboxHandle, SandboxSpec

        return SandboxHandle(provider="fake", name="f", host="h", port=1, token="t",
                             spec=SandboxSpec(image="i", run_id="r", instance_id="x"))


@pytest.mark.parametrize("fails, start_period, retries, calls, passed", [
    (2, 0.0, 3, 3, True),  # two failures of three allowed: passes on the third try
    (3, 0.0, 3, 3, False),  # three in a row: failed
    (4, 3.0, 3, 5, True),  # the first two fall in the start period (a clock tick per try): not counted
    (1, 0.0, 0, 1, False),  # Harbor's retries 0: the first counted failure fails it
])
def test_a_healthcheck_counts_failures_as_harbor_does(monkeypatch, fails, start_period, retries, calls, passed):
    from harness.benchmarks.harbor import environment
    from harness.errors import InfraError

    clock = iter(range(100))
    monkeypatch.setattr(environment.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(environment.time, "sleep", lambda seconds: None)
    check = {"command": "probe", "interval_sec": 0.1, "timeout_sec": 5.0, "start_period_sec": start_period,
             "start_interval_sec": 0.1, "retries": retries}
    sandbox = Checked(fails)
    if passed:
        environment.healthcheck(sandbox, check)
    else:
        with pytest.raises(InfraError, match="the task's healthcheck failed"):
            environment.healthcheck(sandbox, check)
    assert sandbox.calls == calls


def test_several_rewards_are_kept_and_reward_is_their_headline_as_harbor_reports_them():
    """Harbor 0.25 keeps reward.json whole; its primary reward is "reward", else the only value, else none (no
    headline: not judged here), and its job's mean metric gives each key's mean over the runs, 0 where missing."""
    from harness.benchmarks.harbor import report
    from harness.benchmarks.harbor.scorer import HarborScorer
    from harness.results.model import ResultRow
    from harness.scoring.base import ScoreContext, ScorerError
    from tests.test_harbor import RewardFiles

    both = reward(RewardFiles({"reward.json": '{"accuracy": 1, "speed": 0.5}'}))
    assert both == {"rewards": {"accuracy": 1.0, "speed": 0.5}, "source": "reward.json"}  # before: refused
    with pytest.raises(ScorerError, match='2 rewards, none named "reward": no headline'):
        HarborScorer().score(None, "1", context=ScoreContext(verdicts={"harbor": both}))
    headline = reward(RewardFiles({"reward.json": '{"reward": 0.25, "style": 1}'}))
    assert (headline["reward"], headline["rewards"]) == (0.25, {"reward": 0.25, "style": 1.0})

    def row(iid: str, verdict: dict | None) -> ResultRow:
        return ResultRow(instance_id=iid, status="ok" if verdict else "error", question="q",
                         verdicts={"harbor": verdict} if verdict else {})
    latest = {("a", 1): row("a", both), ("b", 1): row("b", headline), ("c", 1): row("c", None)}
    found = report.figures(latest, ["a", "b", "c", "d"], 1)
    assert found == {"reward_means": {"accuracy": 0.25, "reward": 0.0625, "speed": 0.125, "style": 0.25}, "runs": 4}
    assert report.lines(found) == [("reward means (Harbor's)",
                                    "accuracy 0.250, reward 0.062, speed 0.125, style 0.250 over 4 run(s)")]
    assert report.figures({("b", 1): row("b", {"reward": 1.0, "source": "reward.txt"})}, ["b"], 1) == {}


# ---------------------------------------------------------------- real containers

@pytest.mark.docker
def test_the_oracle_scores_every_feature_1_as_harbor_does(tmp_path, python_base):
    py, _, made = python_base
    tasks = copy_tasks(tmp_path / "tasks", py, *FEATURES)
    made.extend(tasks / name / "environment" for name in FEATURES)
    out = out_dir(tmp_path)
    try:
        run = harness("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--output-dir", out)
        assert run.returncode == 0, explain(run)
        got = {r["instance_id"]: r for r in rows(out)}
        rewards = {name: (row["verdicts"]["harbor"].get("reward"), row["verdicts"]["harbor"].get("error"))
                   for name, row in got.items()}
        assert rewards == dict.fromkeys(FEATURES, (1.0, None)), rewards
        verdicts = {name: row["verdicts"]["harbor"] for name, row in got.items()}
        assert verdicts["separate_verifier"]["verifier_mode"] == "separate"
        assert verdicts["artifacts"]["verifier_mode"] == "shared"
        assert "agent: worker; verifier: checker" in verdicts["users"]["output"]
        assert verdicts["reward_json"]["rewards"] == {"reward": 1, "style": 0.5, "steps": 3}
        means = json.loads((out / "report.json").read_text())["figures"]["harbor"]["reward_means"]
        assert means == {"reward": 1.0, "steps": 0.6, "style": 0.1}, means  # as Harbor's mean metric: 0 where missing

        # Artifacts beside the trace, per attempt, in Harbor's layout, the excluded file left out.
        kept = out / got["artifacts"]["trace"].replace(".jsonl", "-artifacts")
        assert (kept / "app" / "answer.txt").read_text() == "hello\n"
        assert sorted(p.relative_to(kept / "results" / "out").as_posix()
                      for p in (kept / "results" / "out").rglob("*")) == ["a.txt", "deeper", "deeper/b.txt"]
        manifest = {e["source"]: e for e in json.loads((kept / "manifest.json").read_text())}
        assert {s: (e["status"], e["type"]) for s, e in manifest.items()} == {
            "/logs/artifacts": ("empty", "directory"), "/app/answer.txt": ("ok", "file"),
            "/app/out": ("ok", "directory")}, manifest
        separate = out / got["separate_verifier"]["trace"].replace(".jsonl", "-artifacts")
        assert (separate / "logs" / "artifacts" / "note.txt").read_text() == "published\n"
        assert not (out / got["reward_json"]["trace"].replace(".jsonl", "-artifacts")).exists()  # none declared
    finally:
        assert remove_leftovers(out) == [], "containers left behind"


HOSTILE = r"""#!/bin/bash
if grep -q "notes into" "$HARNESS_TASK_FILE"; then  # the task whose agent runs out of time, its work done
  echo hello > /app/answer.txt && mkdir -p /app/out && echo kept > /app/out/a.txt && sleep 600
fi
# Wrong work, and every way of reaching the verifier from the agent's sandbox it has.
echo goodbye > /app/answer.txt
ln -sf /etc/passwd /app/extra                     # a declared artifact that is a link
mkdir -p /app/notes && ln -s /etc/shadow /app/notes/link && mkfifo /app/notes/fifo && echo note > /app/notes/ok.txt
echo planted > /app/scratch.txt                   # outside the artifacts
mkdir -p /logs/verifier /tests && echo 1 > /logs/verifier/reward.txt
echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh
setsid bash -c 'touch /tmp/loop-started; while :; do echo 1 > /logs/verifier/reward.txt; sleep 0.02; done' \
  </dev/null >/dev/null 2>&1 &
until [ -e /tmp/loop-started ]; do sleep 0.01; done
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
echo '<solution>done</solution>'
"""
SEEN = r"""#!/bin/bash
mkdir -p /logs/verifier
echo "seen: $(ls -A /app | tr '\n' ' ')| $(ls -A /app/notes 2>/dev/null | tr '\n' ' ')| answer $(cat /app/answer.txt)"
echo "procs: $(cat /proc/[0-9]*/comm 2>/dev/null | sort -u | tr '\n' ' ')"
if [ "$(cat /app/answer.txt 2>/dev/null)" = hello ] && [ ! -e /app/scratch.txt ]; then echo 1; else echo 0; fi \
  > /logs/verifier/reward.txt
"""


@pytest.mark.docker
def test_a_hostile_agent_cannot_reach_a_separate_verifier(tmp_path, python_base):
    """The agent answers wrong, leaves a daemon that writes a reward, plants a reward, a test.sh
    and files outside the artifacts, makes a declared artifact a link and puts a link and a FIFO in a folder one: the
    verifier's container holds the artifacts as they were when the agent's processes were ended (its regular files
    only) and nothing else of the agent's, none of its processes, and the reward is 0."""
    py, _, made = python_base
    tasks = copy_tasks(tmp_path / "tasks", py, "separate_verifier")
    task = tasks / "separate_verifier"
    (task / "task.toml").write_text((task / "task.toml").read_text().replace(
        '"/app/bin"]', '"/app/bin", "/app/extra", "/app/notes"]'))
    (task / "tests" / "test.sh").write_text(SEEN)
    made.append(task / "environment")
    # Beside it, on the same image, a task whose healthcheck never passes: an infra error of its row, named.
    unhealthy = copy_tasks(tasks, py, "healthcheck") / "healthcheck"
    toml = (unhealthy / "task.toml").read_text()
    command = toml.split("command = ")[1].split("\n")[0]
    (unhealthy / "task.toml").write_text(toml.replace(command, '"echo not yet; false"'))
    # And one whose [agent] user the image does not have: an input error of its row, naming the user.
    stranger = copy_tasks(tasks / "more", py, "reward_json") / "reward_json"
    stranger.rename(tasks / "stranger")
    (tasks / "stranger" / "task.toml").write_text((tasks / "stranger" / "task.toml").read_text().replace(
        "[agent]\n", '[agent]\nuser = "nobody-here"\n').replace("[verifier]\n", '[verifier]\nuser = "nobody-here"\n'))
    shutil.rmtree(tasks / "more")
    # And one whose agent runs out of its [agent] timeout_sec: verified all the same, its artifacts kept.
    slow = copy_tasks(tasks, py, "artifacts") / "artifacts"
    (slow / "task.toml").write_text((slow / "task.toml").read_text().replace("[agent]\ntimeout_sec = 60.0",
                                                                            "[agent]\ntimeout_sec = 3.0"))
    names = ("separate_verifier", "healthcheck", "stranger", "artifacts")
    (tasks / "replay.jsonl").write_text("".join(json.dumps({"instance_id": n, "turns": []}) + "\n" for n in names))
    (tmp_path / "hostile.sh").write_text(HOSTILE)
    out = out_dir(tmp_path)
    try:
        run = harness("run", "--dataset", f"harbor:{tasks}", "--agent", f"sandbox:bash @{tmp_path / 'hostile.sh'}",
                      "--model", "replay", "--scorer", "harbor", "--max-retries", "0", "--output-dir", out)
        assert run.returncode == 3, explain(run)  # an errored row
        got = {r["instance_id"]: r for r in rows(out)}
        sick = got["healthcheck"]
        assert (sick["status"], sick["error_kind"]) == ("error", "infra"), sick
        assert "the task's healthcheck failed 3 time(s) in a row (exit code 1): 'echo not yet; false'" in sick["error"]
        assert "not yet" in sick["error"], sick["error"]
        assert got["stranger"]["error_kind"] == "input", got["stranger"]
        assert "has no user 'nobody-here' for its sandbox to run as" in got["stranger"]["error"]
        late = got["artifacts"]
        # As Harbor 0.25: the verifier runs after the agent's timeout, the row keeps its verdict beside the limit
        assert (late["status"], late["limit"]) == ("limit", "wall_time"), late
        assert "reward" in late["verdicts"]["harbor"] and late["correct"] is not None, late
        kept = out / late["trace"].replace(".jsonl", "-artifacts")
        assert (kept / "app" / "answer.txt").read_text() == "hello\n" and (kept / "results/out/a.txt").is_file()
        row = got["separate_verifier"]
        verdict = row["verdicts"]["harbor"]
        assert (row["status"], row["correct"], verdict.get("reward")) == ("ok", False, 0), verdict
        seen, procs = verdict["output"].split("\n")[:2]
        # The answer as it was when the agent's processes ended; no scratch file, no link, no FIFO.
        assert seen.startswith("seen: ") and "scratch.txt" not in seen and "extra" not in seen, seen
        assert seen.endswith("| ok.txt | answer goodbye"), seen
        # the verifier's own script only (run as a program, as Harbor runs it: its comm is its name)
        assert "sleep" not in procs.split() and "test.sh" in procs.split(), procs
        kept = out / row["trace"].replace(".jsonl", "-artifacts")
        manifest = {e["source"]: e for e in json.loads((kept / "manifest.json").read_text())}
        assert manifest["/app/extra"]["status"] == "refused" and not (kept / "app" / "extra").exists()
        assert manifest["/app/notes"]["detail"] == "2 link(s) or special file(s) left out", manifest
        assert sorted(p.name for p in (kept / "app" / "notes").iterdir()) == ["ok.txt"]
    finally:
        assert remove_leftovers(out) == [], "containers left behind"


@pytest.mark.docker
def test_a_verifier_with_an_image_of_its_own_runs_there(tmp_path, python_base):
    """tests/Dockerfile: the verifier runs in that image, built as a task's (its tool, its WORKDIR's file, its own
    /tests; the agent's sandbox has none of them): the oracle scores 1, a do-nothing agent 0 (before: refused at
    load). `[verifier.environment] docker_image` naming such an image, which the engine has: the same; naming one it
    has not: exit 2 naming the task and the image, before any container."""
    py, _, made = python_base
    tasks = copy_tasks(tmp_path / "tasks", py, "verifier_image")
    task = tasks / "verifier_image"
    made.extend([task / "environment", task / "tests"])
    own = f"harness-test-verifier:{secrets.token_hex(4)}"
    built = subprocess.run(["docker", "build", "-q", "-t", own, task / "tests"], capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr
    named = tasks / "named"
    shutil.copytree(task, named)
    (named / "tests" / "Dockerfile").unlink()  # its tests are the image's
    toml = named / "task.toml"
    toml.write_text(toml.read_text() + f'[verifier.environment]\ndocker_image = "{own}"\n')
    out = out_dir(tmp_path)
    try:
        for agent, expected in (("oracle", 1.0), ("nop", 0.0)):
            run = harness("run", "--dataset", f"harbor:{tasks}", "--agent", agent, "--output-dir", out / agent)
            assert run.returncode == 0, explain(run)
            verdicts = {row["instance_id"]: row["verdicts"]["harbor"] for row in rows(out / agent)}
            assert {name: (v.get("reward"), v["verifier_mode"]) for name, v in verdicts.items()} == dict.fromkeys(
                ("verifier_image", "named"), (expected, "separate")), verdicts
        shutil.rmtree(task)
        toml.write_text(toml.read_text().replace(own, "harness-test-absent:1"))
        run = harness("run", "--dataset", f"harbor:{tasks}", "--agent", "oracle", "--output-dir", out / "absent")
        assert run.returncode == 2, explain(run)
        assert "task named: the image harness-test-absent:1 is not on this engine" in run.stderr, explain(run)
    finally:
        assert all(remove_leftovers(out / name) == [] for name in ("oracle", "nop", "absent"))
        subprocess.run(["docker", "rmi", task_images.engine_tag(own), own], capture_output=True, timeout=120)
