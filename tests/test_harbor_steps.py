"""Multi-step Harbor tasks (`[[steps]]`, harness/benchmarks/harbor/steps.py), as Harbor 0.25 runs them: each step its
instruction (a fresh agent run), its workdir/setup.sh, its verifier (the task's tests/ under the step's), in order in
one sandbox; a step below its min_reward ends the task; the task's reward is the steps' mean (or the final one's).

The task folder tests/data/harbor_tasks/multi_step (Harbor's oracle scores it 1.0, a do-nothing agent 0) runs in a
real sandbox of its own image (its FROM line made the python3 base, as tests/test_harbor.py's tasks): the oracle
passes both steps; a scripted agent in the sandbox does the first step and not the second, on the task and on two
variants of it. Before: every such task was refused at load (exit 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.benchmarks.harbor.dataset import load
from harness.benchmarks.harbor.steps import below, combine
from harness.datasets.model import STEPS
from harness.errors import InputError
from harness.runner.prompt import DEFAULT, instruction, later_steps
from tests.helpers.e2e import explain, harness, out_dir, remove_leftovers, rows, trace
from tests.test_harbor import python_task_base

TASK = Path(__file__).parent / "data" / "harbor_tasks" / "multi_step"
# An agent inside the sandbox: the step "write" done (unless its instruction says SKIP), then past its time if it
# says SLOW; "extend" left undone. Its answer says what it saw: the start of its instruction, /tests and
# /logs/verifier, the working directory's files.
AGENT = r"""#!/bin/bash
if grep -q "Write the word hello" "$HARNESS_TASK_FILE" && ! grep -q SKIP "$HARNESS_TASK_FILE"; then
  echo hello > /app/answer.txt
fi
if grep -q SLOW "$HARNESS_TASK_FILE"; then sleep 600; fi
echo "<solution>$(head -c 24 "$HARNESS_TASK_FILE")|tests=$(ls -A /tests 2>/dev/null | tr '\n' ' ')|logs=$(\
ls -A /logs/verifier 2>/dev/null | tr '\n' ' ')|app=$(ls /app | tr '\n' ' ')</solution>"
"""


def copy_task(tasks: Path, name: str, base: str, toml=lambda text: text, write_note: str = "") -> Path:
    folder = tasks / name
    shutil.copytree(TASK, folder)
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("FROM debian:bookworm-slim", f"FROM {base}"))
    (folder / "task.toml").write_text(toml((folder / "task.toml").read_text()))
    if write_note:
        with (folder / "steps" / "write" / "instruction.md").open("a") as out:
            out.write(write_note)
    return folder


@pytest.fixture(scope="module")
def ran(tmp_path_factory, provider, image):
    """The oracle on the task, and the scripted agent on it and two variants: one run each, shared by the tests."""
    tmp = tmp_path_factory.mktemp("steps")
    with python_task_base() as (py, _, made):
        tasks, oracle_tasks = tmp / "tasks", tmp / "oracle"
        made.append(copy_task(oracle_tasks, "multi_step", py) / "environment")
        copy_task(tasks, "multi_step", py)  # min_reward 1 on "write", which the agent passes: mean of 1 and 0
        copy_task(tasks, "skipped", py, write_note="SKIP this step.\n")  # "write" failed: the task ends there
        copy_task(tasks, "final", py, toml=lambda t: t.replace('"mean"', '"final"').replace("min_reward = 1.0\n", ""))
        copy_task(tasks, "late", py, write_note="SLOW\n",  # past its 2 s: verified all the same, the task goes on
                  toml=lambda t: t.replace("min_reward = 1.0\n",
                                           "min_reward = 1.0\n[steps.agent]\ntimeout_sec = 2.0\n"))
        broken = copy_task(tasks, "broken", py)  # extend's setup.sh fails: no agent run, no reward, the task ends
        (broken / "steps" / "extend" / "workdir" / "setup.sh").write_text("echo cannot >&2; exit 3\n")
        for folder in (tasks, oracle_tasks):
            (folder / "replay.jsonl").write_text("".join(json.dumps({"instance_id": p.name, "turns": []}) + "\n"
                                                         for p in folder.iterdir() if p.is_dir()))
        (tmp / "agent.sh").write_text(AGENT)
        replayed = tmp / "replayed"  # the plain runner on a recording: each step's run goes on with its turns
        copy_task(replayed, "multi_step", py)
        shell = lambda command: {"tool_calls": [{"name": "run_shell", "arguments": {"command": command}}]}  # noqa: E731
        turns = [shell("echo hello > answer.txt"), {"content": "<solution>one</solution>"},
                 shell('echo "hello $(cat suffix.txt)" > answer.txt'), {"content": "<solution>two</solution>"}]
        (replayed / "replay.jsonl").write_text(json.dumps({"instance_id": "multi_step", "turns": turns}) + "\n")
        outs = {"oracle": out_dir(tmp, "oracle"), "agent": out_dir(tmp, "agent"), "plain": out_dir(tmp, "plain")}
        try:
            done = {"oracle": harness("run", "--dataset", f"harbor:{oracle_tasks}", "--agent", "oracle",
                                      "--model", "replay", "--output-dir", outs["oracle"]),
                    "agent": harness("run", "--dataset", f"harbor:{tasks}", "--agent",
                                     f"sandbox:bash @{tmp / 'agent.sh'}", "--model", "replay", "--output-dir",
                                     outs["agent"]),
                    "plain": harness("run", "--dataset", f"harbor:{replayed}", "--agent", "plain", "--model",
                                     "replay", "--output-dir", outs["plain"])}
            yield done, outs
        finally:
            for out in outs.values():
                assert remove_leftovers(out) == [], "containers left behind"


@pytest.mark.docker
def test_the_oracle_passes_each_step_and_the_task(ran):
    done, outs = ran
    assert done["oracle"].returncode == 0, explain(done["oracle"])
    [row] = rows(outs["oracle"])
    verdict = row["verdicts"]["harbor"]
    assert row["status"] == "ok" and row["correct"] is True and verdict["reward"] == 1.0, row
    assert [(s["name"], s["reward"]) for s in verdict["steps"]] == [("write", 1.0), ("extend", 1.0)], verdict
    assert verdict["source"] == "steps (mean)" and row["scores"]["harbor"]["details"]["steps"] == {
        "write": 1.0, "extend": 1.0}


@pytest.mark.docker
def test_a_recordings_turns_go_on_from_step_to_step(ran):
    """Before: each step's fresh runner replayed the recording from its first turn (step 2 wrote hello again)."""
    done, outs = ran
    assert done["plain"].returncode == 0, explain(done["plain"])
    [row] = rows(outs["plain"])
    assert [s["reward"] for s in row["verdicts"]["harbor"]["steps"]] == [1.0, 1.0], row["verdicts"]
    assert row["answer"] == "two" and row["correct"] is True, row


@pytest.mark.docker
def test_each_step_is_a_fresh_agent_run_verified_in_turn_and_combined_as_harbor_does(ran):
    done, outs = ran
    assert done["agent"].returncode == 0, explain(done["agent"])
    got = {r["instance_id"]: r for r in rows(outs["agent"])}
    steps = {name: [(s["name"], s.get("reward"), s.get("stopped")) for s in row["verdicts"]["harbor"]["steps"]]
             for name, row in got.items()}
    assert steps == {"multi_step": [("write", 1.0, None), ("extend", 0.0, None)],
                     "skipped": [("write", 0.0, "below its min_reward: reward = 0.0 < 1")],
                     "final": [("write", 1.0, None), ("extend", 0.0, None)],
                     "late": [("write", 1.0, None), ("extend", 0.0, None)],
                     "broken": [("write", 1.0, None), ("extend", None, "its setup.sh failed")]}, steps
    rewards = {name: (row["verdicts"]["harbor"]["reward"], row["correct"]) for name, row in got.items()}
    # broken: Harbor leaves a step without a verifier's result out of the mean
    assert rewards == {"multi_step": (0.5, False), "skipped": (0.0, False), "final": (0.0, False),
                       "late": (0.5, False), "broken": (1.0, True)}, rewards
    assert got["late"]["limit"] == "wall_time" and got["late"]["verdicts"]["harbor"]["steps"][0]["agent_timed_out"]
    assert all(row["limit"] is None for name, row in got.items() if name != "late"), got
    assert got["broken"]["verdicts"]["harbor"]["steps"][1]["error"] == \
        "step 'extend': setup.sh exited with code 3: cannot"
    assert "steps: write 1, extend 0" in got["multi_step"]["scores"]["harbor"]["explanation"]

    # The last step's run: its own instruction, setup.sh's file there, no tests nor rewards of the step before.
    assert got["multi_step"]["answer"] == "Replace the line in /app|tests=|logs=|app=answer.txt setup.sh suffix.txt", \
        got["multi_step"]["answer"]
    tasks = [e["task"] for e in trace(outs["agent"], got["multi_step"]) if e["type"] == "task"]
    assert [t.split("\n", 1)[0] for t in tasks] == [
        "Write the word hello into /app/answer.txt.",
        "Replace the line in /app/answer.txt with: hello, a space, then the word in /app/suffix.txt."], tasks
    assert all("How to work:" in t for t in tasks)  # each through the run's prompt template

    report = json.loads((outs["agent"] / "report.json").read_text())
    assert report["figures"]["harbor"]["steps"] == {
        "write": {"ran": 5, "rewarded": 5, "stopped": 1, "mean_reward": 0.8},
        "extend": {"ran": 4, "rewarded": 3, "stopped": 1, "mean_reward": 0.0}}, report["figures"]
    shown = " ".join(done["agent"].stdout.split())  # the run's report table, as the terminal shows it
    assert "step write │ mean reward 0.8 over 5 of 5 run(s); ended the" in shown, shown
    assert "step extend │ mean reward 0 over 3 of 4 run(s); ended the" in shown, shown
    assert "per annotated step count" not in shown, shown  # the steps are no GAIA step-count label


# ---------------------------------------------------------------- the task format and the rewards, without an engine

def test_a_multi_step_task_loads_as_one_instance_its_later_steps_rendered_by_the_template():
    [instance] = load(TASK).instances
    assert instance.question == "Write the word hello into /app/answer.txt.\n"
    assert instance.metadata[STEPS] == [(TASK / "steps/extend/instruction.md").read_text()]
    steps = instance.metadata["harbor_steps"]
    assert [(s["name"], s["agent_timeout"], s["verifier_timeout"], s["min_reward"]) for s in steps] == [
        ("write", 60.0, 600.0, 1.0), ("extend", 60.0, 30.0, None)]  # a step's verifier timeout is its own (Harbor)
    assert steps[1]["verifier_env"] == {"ANSWER": "/app/answer.txt", "EXPECTED": "hello world"}
    assert instance.timeout == 60 + 600 + 2 * 60 + 30  # each step's agent, setup.sh and verifier time
    [later] = later_steps(instance, DEFAULT)
    assert later.startswith("Replace the line") and later.endswith(instruction(instance).split("\n\n", 1)[1])


@pytest.mark.parametrize(("change", "says"), [
    (lambda f: (f / "steps/extend/instruction.md").unlink(), "no steps/extend/instruction.md"),
    (lambda f: (f / "steps/write/tests/test.sh").unlink(), "no steps/write/tests/test.sh nor tests/test.sh"),
    (lambda f: (f / "steps/write/solution/solve.sh").unlink(), "steps/write/solution/ has no solve.sh"),
    (lambda f: _toml(f, 'name = "extend"', 'name = "WRITE"'), "steps[1] ('WRITE').name: a step of that name"),
    (lambda f: _toml(f, 'name = "extend"', 'name = "a/b"'), "steps[1] ('a/b').name: not a portable folder name"),
    (lambda f: _toml(f, "min_reward = 1.0\n", "min_reward = 1.0\n[steps.healthcheck]\ncommand = \"true\"\n"),
     "steps[0] ('write').healthcheck: a step's own healthcheck is not supported"),
    (lambda f: _toml(f, "min_reward = 1.0\n", "min_reward = 1.0\nartifacts = [\"/app/x\"]\n"),
     "steps[0] ('write').artifacts: a step's own artifacts is not supported"),
    (lambda f: _toml(f, "timeout_sec = 30.0\n", "timeout_sec = 30.0\nenvironment_mode = \"separate\"\n"),
     "steps[1] ('extend').verifier.environment_mode: a separate verifier environment is not supported"),
    (lambda f: _toml(f, "[steps.verifier]\n", "[steps.agent]\nuser = \"nobody\"\n[steps.verifier]\n"),
     "steps[1] ('extend').agent.user: a step's own agent user is not supported"),
    (lambda f: _toml(f, '"mean"', '"median"'), "multi_step_reward_strategy"),
    (lambda f: _toml(f, "timeout_sec = 30.0\n", "timeout_sec = inf\n"),
     "steps[1] ('extend').verifier.timeout_sec inf is not a finite number of seconds"),
    (lambda f: _toml(f, "timeout_sec = 60.0\nenv", "timeout_sec = 60.0\nenvironment_mode = \"separate\"\nenv"),
     "verifier: a separate verifier environment for a multi-step task's steps is not supported"),
])
def test_a_multi_step_task_that_cannot_run_is_refused_naming_the_file_or_key(tmp_path, change, says):
    folder = tmp_path / "task"
    shutil.copytree(TASK, folder)
    change(folder)
    with pytest.raises(InputError) as refused:
        load(folder)
    assert says in str(refused.value) and str(folder.resolve()) in str(refused.value), refused.value


def _toml(folder: Path, old: str, new: str) -> None:
    path = folder / "task.toml"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))


def test_min_reward_gates_on_reward_or_on_each_named_value_a_missing_one_failing():
    assert below(None, {}) is None and below(1.0, {"reward": 1.0}) is None
    assert below(1.0, {"reward": 0.5}) == "reward = 0.5 < 1"
    assert below({"a": 0.5, "b": 1}, {"a": 0.5, "b": 1.0}) is None
    assert below({"a": 0.5, "b": 1}, {"a": 0.5}) == "b = missing < 1"


def test_the_steps_rewards_combine_as_harbor_combines_them():
    ok = lambda name, **rewards: {"name": name, "reward": rewards.get("reward", 0), "rewards": rewards}  # noqa: E731
    txt = lambda name, reward: {"name": name, "reward": reward, "source": "reward.txt"}  # noqa: E731
    failed = {"name": "c", "error": "the verifier wrote no /logs/verifier/reward.txt nor reward.json"}
    # mean: per value over the steps that gave a reward, a value a step lacks counting 0; a step with none left out
    mean = combine([ok("a", reward=1, style=1), txt("b", 0.5), failed], "mean")
    assert (mean["reward"], mean["rewards"], mean["source"]) == (0.75, {"reward": 0.75, "style": 0.5}, "steps (mean)")
    assert combine([txt("a", 1), txt("b", 0)], "mean")["reward"] == 0.5 and "rewards" not in combine(
        [txt("a", 1)], "mean")
    # final: the last step run, as it is; with no reward, none
    assert combine([txt("a", 1), txt("b", 0.25)], "final")["reward"] == 0.25
    assert combine([txt("a", 1), failed], "final")["error"] == "the final step's verifier gave no reward"
    assert combine([failed], "mean")["error"] == "no step's verifier gave a reward"
    assert combine([ok("a", score=1.0), ok("b", score=0.0)], "mean")["reward"] == 0.5  # one value alone
    several = combine([{"name": "a", "rewards": {"x": 1.0, "y": 0.0}}, ok("b", x=0.0, y=1.0)], "mean")
    assert "reward" not in several and "error" not in several and several["rewards"] == {"x": 0.5, "y": 0.5}
