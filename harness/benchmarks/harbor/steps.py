"""Multi-step Harbor tasks (`[[steps]]` of task.toml, schema 1.4), run as Harbor 0.25 runs them (its
harbor/trial/multi_step.py), in one sandbox, step after step:

1. the step's steps/NAME/workdir/ is copied into the task's working directory and its setup.sh (if it has one)
   run there; a setup.sh that fails ends the task: the step has no reward and no later step runs;
2. a fresh run of the agent gets the step's instruction (steps/NAME/instruction.md, through the run's prompt
   template, as any question), for the step's [steps.agent] timeout_sec (else the task's [agent] one). A run
   past its time is stopped and the step is verified all the same (as in Harbor); the row then records the
   `wall_time` limit, its verdict kept. The agent's other limits (--max-steps, tokens, cost) hold for the task's
   steps together. The agent sees no earlier step's conversation: what it knows of them is what they left in
   the sandbox;
3. the step's verifier, as a single-step task's (environment.py `verify`: every process the agent left ended
   first), with the task's tests/ then steps/NAME/tests/ over it in /tests, bash /tests/test.sh, [verifier] env
   with the step's own over it, for the step's [steps.verifier] timeout_sec (its own, 600 s when unset: Harbor
   reads no task-level fallback there); /tests and /logs/verifier are emptied after it, before the next step;
4. the task stops after a step whose verifier gave no reward, or whose reward misses its `min_reward` (a number:
   the "reward" value; a table: each named value, a missing one failing).

The task's reward (`multi_step_reward_strategy`): "mean" (the default) is each value's mean over the steps whose
verifier gave a reward (a value a step lacks counts 0; a step with none, or never run, is left out); "final" is
the last run step's rewards, as they are. The verdict keeps each step's (`steps`: its name, reward or error,
exit code) beside the combined reward (several values, none named "reward": the values alone, no headline, as a
single step's). The report's figures (`figures`, `lines`) give each step's mean reward over the run. --agent
oracle runs steps/NAME/solution/solve.sh for a step that has a solution folder, else the task's solution/solve.sh.

Refused at load (dataset.py, exit 2): a step key Harbor knows that the harness does not do for a step (its own
healthcheck, artifacts, user, network policy, collect hooks or separate verifier environment, or the task's separate
verifier); a timeout that is no finite number of seconds; a missing step instruction or test script; step names that
are not portable folder names or that collide.
"""

from __future__ import annotations

import asyncio
import math
import shlex
import unicodedata
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from harness.benchmarks.harbor.environment import PREP_TIMEOUT_S, REWARDS, STAGE, HarborEnv, verify, workdir
from harness.benchmarks.harbor.lint import MAX_SECONDS
from harness.errors import LimitExceeded

T = TypeVar("T")
BAD_NAME = set('<>:"/\\|?*') | {chr(c) for c in range(32)} | {"\x7f"}
# Keys of a [[steps]] table the harness does not do for a step: refused, naming them
REFUSED = {"healthcheck": "a step's own healthcheck", "artifacts": "a step's own artifacts",
           "agent.user": "a step's own agent user", "verifier.user": "a step's own verifier user",
           "agent.network_mode": "a step's own network policy", "verifier.network_mode": "a step's own network "
           "policy", "agent.allowed_hosts": "an allow list", "verifier.allowed_hosts": "an allow list",
           "verifier.environment": "a separate verifier environment", "verifier.collect": "collect hooks"}


def problems(folder: Path, raw: dict[str, Any], steps: list[Any]) -> list[str]:
    """What of the task's [[steps]] cannot run: a refused key, a bad or repeated name, a missing file."""
    found, seen = [], set()
    verifier = raw.get("verifier")
    verifier = verifier if isinstance(verifier, dict) else {}
    if verifier.get("environment_mode") == "separate" or verifier.get("environment") is not None:
        found.append("task.toml: verifier: a separate verifier environment for a multi-step task's steps is not "
                     "supported (each step is verified in the task's one sandbox)")
    for index, (table, step) in enumerate(zip(raw.get("steps") or [], steps, strict=True)):
        where = f"steps[{index}] ({step.name!r})"
        for key, what in REFUSED.items():
            part, _, sub = key.partition(".")
            value = table.get(part)
            if (value is not None and not sub) or (isinstance(value, dict) and value.get(sub) is not None):
                found.append(f"{where}.{key}: {what} is not supported (the harness runs every step in the "
                             "task's one sandbox, with the task's settings)")
        for phase, seconds in (("agent", step.agent.timeout_sec), ("verifier", step.verifier.timeout_sec)):
            if seconds is not None and not (math.isfinite(seconds) and seconds <= MAX_SECONDS):
                found.append(f"{where}.{phase}.timeout_sec {seconds:g} is not a finite number of seconds up to "
                             f"{MAX_SECONDS:g} (30 days)")
        if (table.get("verifier") or {}).get("environment_mode") == "separate":
            found.append(f"{where}.verifier.environment_mode: a separate verifier environment is not supported")
        name = step.name
        if (not name.strip() or name in {".", ".."} or name.endswith((".", " ")) or BAD_NAME & set(name)
                or len(name.encode()) > 255):
            found.append(f"{where}.name: not a portable folder name (no path separator, control or reserved "
                         "character, trailing dot or space)")
            continue
        key = unicodedata.normalize("NFC", name).casefold()
        if key in seen:
            found.append(f"{where}.name: a step of that name (case and Unicode form aside) comes before it")
        seen.add(key)
        if not (folder / "steps" / name / "instruction.md").is_file():
            found.append(f"no steps/{name}/instruction.md")
        if not any((folder / place / "test.sh").is_file() for place in (f"steps/{name}/tests", "tests")):
            found.append(f"no steps/{name}/tests/test.sh nor tests/test.sh for step {name!r}")
        solution = folder / "steps" / name / "solution"
        if solution.is_dir() and not (solution / "solve.sh").is_file():
            found.append(f"steps/{name}/solution/ has no solve.sh")
    return found


def described(folder: Path, config: Any) -> list[dict[str, Any]]:
    """Each step as the run reads it: the instance's metadata `harbor_steps` (not `steps`, a GAIA label the report
    breaks rows down by)."""
    return [{"name": step.name, "agent_timeout": step.agent.timeout_sec or config.agent.timeout_sec,
             "verifier_timeout": step.verifier.timeout_sec,
             "verifier_env": {**config.verifier.env, **step.verifier.env},
             "min_reward": step.min_reward, "tests": (folder / "steps" / step.name / "tests").is_dir(),
             "solution": (folder / "steps" / step.name / "solution").is_dir(),
             "workdir": (folder / "steps" / step.name / "workdir").is_dir()} for step in config.steps]


def instruction(folder: Path, step: Any) -> str:
    return (folder / "steps" / step.name / "instruction.md").read_text(encoding="utf-8")


def solution(env: HarborEnv) -> str:
    """The task folder's solution the oracle runs now: the current step's own, else the task's."""
    step = env.steps[env.step] if env.steps else None
    return f"steps/{step['name']}/solution" if step is not None and step["solution"] else "solution"


async def run(env: HarborEnv, work: Callable[[], Awaitable[T]]) -> T | None:
    """Every step of the task in turn (module doc); `env.verdict` the task's, with each step's."""
    records: list[dict[str, Any]] = []
    late: list[str] = []
    result = None
    for index, step in enumerate(env.steps):
        env.step = index
        record: dict[str, Any] = {"name": step["name"]}
        records.append(record)
        if (problem := await asyncio.to_thread(_prepare, env, step)) is not None:
            record.update(error=problem, stopped="its setup.sh failed")
            break
        try:
            result = await asyncio.wait_for(work(), step["agent_timeout"])
        except TimeoutError:
            late.append(step["name"])
            record["agent_timed_out"] = True
        env.verifier_timeout, env.verifier_env = step["verifier_timeout"], step["verifier_env"]
        env.tests = ("tests", f"steps/{step['name']}/tests") if step["tests"] else ("tests",)
        verdict = await asyncio.to_thread(verify, env)
        await asyncio.to_thread(_clear, env)
        record.update({k: v for k, v in verdict.items() if k != "output"}, output=str(verdict.get("output", ""))[-300:])
        if "error" in verdict:
            record["stopped"] = "its verifier gave no reward"
            break
        if (missed := below(step["min_reward"], rewards(verdict))) is not None:
            record["stopped"] = f"below its min_reward: {missed}"
            break
    env.verdict = combine(records, env.reward_strategy)
    if late:
        raise LimitExceeded("wall_time", f"the agent's time of step(s) {', '.join(late)} (their timeout_sec)")
    return result


def rewards(verdict: dict[str, Any]) -> dict[str, float]:
    """A verifier's values by name, as Harbor keeps them (reward.txt's one number is "reward")."""
    if "error" in verdict:
        return {}
    return dict(verdict.get("rewards") or ({"reward": verdict["reward"]} if "reward" in verdict else {}))


def below(minimum: float | dict[str, float] | None, got: dict[str, float]) -> str | None:
    """The first value under its min_reward (a missing value is below any), or None."""
    wanted = {} if minimum is None else {"reward": minimum} if isinstance(minimum, int | float) else minimum
    for key, threshold in wanted.items():
        if got.get(key, float("-inf")) < threshold:
            return f"{key} = {got.get(key, 'missing')} < {threshold:g}"
    return None


def combine(records: list[dict[str, Any]], strategy: str) -> dict[str, Any]:
    """The task's verdict from its steps' records (module doc)."""
    base = {"steps": records, "strategy": strategy}
    if strategy == "final":
        last = rewards(records[-1]) if records else {}
        values = last
    else:
        scored = [got for record in records if (got := rewards(record))]
        keys = sorted({key for got in scored for key in got})
        values = {key: sum(got.get(key, 0.0) for got in scored) / len(scored) for key in keys}
    if not values:
        said = "the final step's verifier gave no reward" if strategy == "final" else "no step's verifier gave a reward"
        return {**base, "error": said}
    source = {"source": f"steps ({strategy})", **({"rewards": values} if set(values) != {"reward"} else {})}
    if "reward" not in values and len(values) > 1:  # no headline, as a single step's several values none "reward"
        return {**base, **source}
    return {**base, "reward": values.get("reward", next(iter(values.values()))), **source}


def _prepare(env: HarborEnv, step: dict[str, Any]) -> str | None:
    """The step's workdir/ copied into the working directory and its setup.sh run; None, or why it failed."""
    if not step["workdir"]:
        return None
    sandbox, name, where = env.sandbox, f"steps/{step['name']}/workdir", workdir(env.sandbox)
    sandbox.copy_in(env.task_dir, [name], dest=STAGE)
    copied = sandbox.shell(f"cp -a {STAGE}/{shlex.quote(name)}/. {shlex.quote(where)}/ && rm -rf {STAGE}",
                           timeout=PREP_TIMEOUT_S, cwd="/")
    if not copied.ok:
        return f"step {step['name']!r}: its workdir/ could not be copied: {copied.stderr.strip()[-300:]}"
    if not (env.task_dir / name / "setup.sh").is_file():
        return None
    setup = sandbox.exec(["bash", f"{where.rstrip('/')}/setup.sh"], timeout=step["agent_timeout"], cwd=where)
    return None if setup.ok else (f"step {step['name']!r}: setup.sh exited with code {setup.exit_code}: "
                                  f"{setup.stderr.strip()[-300:]}")


def _clear(env: HarborEnv) -> None:
    """The step's tests and its verifier's outputs out of the agent's sight before the next step."""
    env.sandbox.shell(f"rm -rf /tests/* /tests/.[!.]* {REWARDS}/* {REWARDS}/.[!.]*", timeout=PREP_TIMEOUT_S, cwd="/")


def figures(latest: Mapping[tuple[str, int], Any], selected: Sequence[str]) -> dict[str, Any]:
    """The report's figures of the run's multi-step tasks: for each step (by name) over the latest rows, how many ran
    it, how many of those its verifier gave a reward, their mean and how many ended the task there; {} without
    steps (report.json keeps them under "harbor")."""
    steps: dict[str, dict[str, Any]] = {}
    chosen = set(selected)
    for (iid, _), row in latest.items():
        for step in ((row.verdicts.get("harbor") or {}).get("steps") or []) if iid in chosen else []:
            got = steps.setdefault(str(step.get("name")), {"ran": 0, "rewarded": 0, "rewards": [], "stopped": 0})
            got["ran"] += 1
            got["stopped"] += bool(step.get("stopped"))
            if isinstance(step.get("reward"), int | float) and "error" not in step:
                got["rewarded"] += 1
                got["rewards"].append(float(step["reward"]))
    return {"steps": {name: {"ran": g["ran"], "rewarded": g["rewarded"], "stopped": g["stopped"],
                             "mean_reward": sum(g["rewards"]) / len(g["rewards"]) if g["rewards"] else None}
                      for name, g in steps.items()}} if steps else {}


def lines(found: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each step's line of the report table."""
    return [(f"step {name}", f"mean reward {'-' if g['mean_reward'] is None else format(g['mean_reward'], '.3g')} "
                             f"over {g['rewarded']} of {g['ran']} run(s)"
                             + (f"; ended the task in {g['stopped']}" if g["stopped"] else ""))
            for name, g in (found.get("steps") or {}).items()]
