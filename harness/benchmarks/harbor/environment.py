"""A Harbor task's verifier, run in the instance's sandbox once the agent's turns are over (the harbor tool family,
harness/benchmarks/harbor/family.py), and the task's folders put where Harbor puts them.

As Harbor does: the task's tests/ are copied to /tests (anything already there, which the agent could have
planted, removed first), /logs/verifier is emptied, and `bash /tests/test.sh` runs in the task's working
directory with [verifier] env, for at most [verifier] timeout_sec. The reward is what test.sh wrote:
/logs/verifier/reward.json (a number, or an object: its "reward", or its only value), else reward.txt (one number),
in Harbor's order (harbor 0.25's verifier reads the JSON first); the
script's exit code is kept but, as in Harbor, never read as the reward. A verifier that did not end in time,
wrote no reward or wrote one that is no number gives a verdict with an `error`: the harbor scorer
(harness/benchmarks/harbor/scorer.py) then cannot judge the row (a ScorerError), never a wrong answer. A sandbox that
died meanwhile raises, as every sandbox request does (an infra error of the row).
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import SandboxFileNotFound
from harness.sandbox.contract import ExecResult, Sandbox

STAGE = "/tmp/harness-harbor"  # where copy_in may write; moved from there to Harbor's place
REWARDS = "/logs/verifier"
PREP_TIMEOUT_S = 120.0


@dataclass
class HarborEnv:
    sandbox: Sandbox
    task_dir: Path
    agent_timeout: float
    verifier_timeout: float
    verifier_env: dict[str, str] = field(default_factory=dict)
    verdict: dict[str, Any] | None = None  # the verifier's, once the agent's turns are over


def workdir(sandbox: Sandbox) -> str:
    """The task image's working directory (written into the image when it was built: task_images.py)."""
    try:
        return sandbox.read_file("/opt/harness/workdir").decode().strip() or "/"
    except SandboxFileNotFound:
        return "/"


def place(sandbox: Sandbox, task_dir: Path, name: str, target: str, also: str = "") -> str | None:
    """Copy the task's folder `name` to `target` in the sandbox (emptied first), after the shell command `also`;
    None, or why it could not be done."""
    sandbox.copy_in(task_dir, [name], dest=STAGE)
    quoted = shlex.quote(target)
    done = sandbox.shell(f"{also}mkdir -p {quoted} && find {quoted} -mindepth 1 -delete && "
                         f"cp -a {STAGE}/{name}/. {quoted}/ && rm -rf {STAGE}", timeout=PREP_TIMEOUT_S, cwd="/")
    return None if done.ok else f"the task's {name}/ could not be put in {target}: {done.stderr.strip()[-500:]}"


def verify(env: HarborEnv) -> dict[str, Any]:
    """Run the task's verifier in its sandbox; the verdict (`reward`, or `error`)."""
    sandbox = env.sandbox
    clear = f"rm -rf {REWARDS} && mkdir -p {REWARDS} /logs/agent && "
    if (problem := place(sandbox, env.task_dir, "tests", "/tests", clear)) is not None:
        return {"error": problem}
    ran = sandbox.exec(["bash", "/tests/test.sh"], timeout=env.verifier_timeout, cwd=workdir(sandbox),
                       env=env.verifier_env)
    facts = {"exit_code": ran.exit_code, "seconds": round(ran.duration, 3), "output": _tail(ran)}
    if ran.timed_out:
        return {**facts, "error": f"the verifier did not end within its timeout_sec ({env.verifier_timeout:g} s)"}
    try:
        found = reward(sandbox)
    except ValueError as exc:
        return {**facts, "error": str(exc)}
    return {**facts, **found}


def reward(sandbox: Sandbox) -> dict[str, Any]:
    """The reward test.sh wrote, as Harbor reads it: reward.json first, else reward.txt. ValueError: none, or
    not a number."""
    for name in ("reward.json", "reward.txt"):
        try:
            text = sandbox.read_file(f"{REWARDS}/{name}").decode(errors="replace").strip()
        except SandboxFileNotFound:
            continue
        if not text:
            raise ValueError(f"the verifier's {REWARDS}/{name} is empty")
        if name == "reward.txt":
            return {"reward": _number(text, name), "source": name}
        try:
            rewards = json.loads(text)
        except ValueError:
            raise ValueError(f"the verifier's {REWARDS}/{name} is not JSON") from None
        if not isinstance(rewards, dict):
            return {"reward": _number(rewards, name), "source": name}
        if not ("reward" in rewards or len(rewards) == 1):
            raise ValueError(f"the verifier's {REWARDS}/{name} names no \"reward\" (nor one value alone)")
        value = rewards["reward"] if "reward" in rewards else next(iter(rewards.values()))
        return {"reward": _number(value, name), "rewards": rewards, "source": name}
    raise ValueError(f"the verifier wrote no {REWARDS}/reward.txt nor reward.json")


def _number(value: Any, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"the verifier's {REWARDS}/{name} holds {str(value)[:80]!r}, not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"the verifier's {REWARDS}/{name} holds {number}, not a finite number")
    return number


def _tail(result: ExecResult) -> str:
    return (result.stdout[-1500:] + ("\n" + result.stderr[-1500:] if result.stderr.strip() else "")).strip()
