"""A Harbor task's verifier, run once the agent's turns are over (the harbor tool family,
harness/benchmarks/harbor/family.py), and the task's folders put where Harbor puts them; before the agent, Harbor's
/logs folders and the task's healthcheck (`prepare`).

As Harbor does, with what agent code left behind out of the way first: every process in the sandbox but its
service is ended (`Sandbox.end_processes`: a daemon the agent left, such as a `setsid` loop writing a reward, is
gone; one that cannot be ended means no verifier run, an `error`), the task's artifacts are collected beside the
trace (artifacts.py), and, in the separate mode (verifier_mode.py), put into the verifier's own sandbox, where the
rest happens; in the shared mode in the agent's. Then the task's tests/ are copied to /tests (but for a separate
verifier's image of its own, whose /tests are its own, as in Harbor) through a staging folder made afresh (both
emptied first, a link in their place removed, so nothing the agent planted is copied along), /logs/verifier is
made afresh, and /tests/test.sh runs as a program (its `#!` line
chooses the interpreter, as in Harbor: `executed`) in the task's working directory with [verifier] env, for at most
[verifier] timeout_sec. The reward is what test.sh wrote: /logs/verifier/reward.json (an object: its "reward", or
its only value), else reward.txt (one number), in Harbor's order (harbor 0.25's verifier reads the JSON first); the
script's exit code is kept but, as in Harbor, never read as the reward. reward.json's values are kept whole
(`rewards`), as Harbor keeps a trial's; "reward" (or the only value) is the headline, as Harbor's primary reward: an
object of several values none of which is named "reward" has none (the row is not judged; the report gives each
value's mean over the runs, as Harbor's mean metric does: harness/benchmarks/harbor/report.py).

A reward is a finite number, as Harbor 0.25 has it (of any size: Harbor neither bounds nor clamps one; the
harbor scorer clamps its score's value). reward.txt holds one number in decimal digits (Python's float(), Harbor's
reading, would also take `1_0` as 10, `nan` and `inf`); reward.json is an object whose values are all finite
numbers (a string or a list is refused, a bare number too, as in Harbor; true and false are 1 and 0 there), at
most MAX_REWARDS of them, named in at most MAX_NAME characters; a reward file over MAX_REWARD_BYTES is refused
unread. The verdict keeps reward.json's values (`rewards`), once.

A verifier that did not end in time, wrote no reward or wrote one that is none of these gives a verdict with an
`error`: the harbor scorer (harness/benchmarks/harbor/scorer.py) then cannot judge the row (a ScorerError), never a
wrong answer. A sandbox that died meanwhile raises, as every sandbox request does (an infra error of the row).

What stays as in Harbor's shared verifier mode: the verifier runs the image's programs as the agent's user, so an
agent whose user may change them (a root task user, its own home's Python site) can change what the verifier
runs; the separate mode closes that (docs/reliability.md).
"""

from __future__ import annotations

import json
import logging
import math
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.benchmarks.harbor.artifacts import CONVENTION, Entry, collect, seed
from harness.errors import InfraError, SandboxFileNotFound, SandboxOutputLimit, SandboxUnsupported
from harness.sandbox.contract import ExecResult, Sandbox

log = logging.getLogger(__name__)
STAGE = "/tmp/harness-harbor"  # where copy_in may write; moved from there to Harbor's place
REWARDS = "/logs/verifier"
PREP_TIMEOUT_S = 120.0
MAX_REWARD_BYTES = 64 * 1024  # a reward file, read whole (Harbor's hold a few numbers)
MAX_REWARDS = 64  # values of reward.json
MAX_NAME = 200  # characters of a value's name in reward.json
# A number in decimal digits (`.5` as bc writes it, `1e-05` as Python does); no `_`, `nan`, `inf` or hex
NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")


@dataclass
class HarborEnv:
    sandbox: Sandbox
    task_dir: Path
    agent_timeout: float
    verifier_timeout: float
    verifier_env: dict[str, str] = field(default_factory=dict)
    verdict: dict[str, Any] | None = None  # the verifier's, once the agent's turns are over
    tests: tuple[str, ...] = ("tests",)  # the task's folders copied to /tests, in order (a step's over the task's)
    # A multi-step task's steps (harness/benchmarks/harbor/steps.py), the one running, how their rewards combine
    steps: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0
    reward_strategy: str = "mean"
    separate: bool = False  # the verifier runs in a sandbox of its own, `judge` (else in `sandbox`)
    judge: Sandbox | None = None
    bundled: bool = False  # the separate verifier's image is its own: its /tests are the image's, none copied in
    artifacts: list[Entry] = field(default_factory=list)  # what is collected (artifacts.py), the convention first
    declared: bool = False  # the task declares artifacts
    collected: Path | None = None  # where they go on the host (beside the trace); None: not collected


def workdir(sandbox: Sandbox) -> str:
    """Where Harbor runs a task's commands: its [environment] workdir (the sandbox's, `SandboxSpec.workdir`), else its
    image's working directory (written into the image when it was built: task_images.py)."""
    if own := sandbox.handle().spec.workdir:
        return own
    try:
        return sandbox.read_file("/opt/harness/workdir").decode().strip() or "/"
    except SandboxFileNotFound:
        return "/"


def place(sandbox: Sandbox, task_dir: Path, name: str | tuple[str, ...], target: str, also: str = "") -> str | None:
    """Copy the task's folder `name` (or folders, each over the one before) to `target` in the sandbox, after the
    shell command `also`, through a staging folder: both made afresh first (emptied, a link in their place
    removed); None, or why it could not be done."""
    names = [n for n in ((name,) if isinstance(name, str) else name) if (task_dir / n).is_dir()]
    if not names:
        return f"the task has no {name}/ to put in {target}"
    quoted = shlex.quote(target)
    fresh = sandbox.shell(f"{also}rm -rf {STAGE} && {{ [ ! -L {quoted} ] || rm -f {quoted}; }} && mkdir -p {quoted} "
                          f"&& find {quoted} -mindepth 1 -delete", timeout=PREP_TIMEOUT_S, cwd="/")
    if fresh.ok:
        sandbox.copy_in(task_dir, names, dest=STAGE)
        # Each folder's entries, not the folder itself: a mount's root (Harbor's places are) keeps its owner's times
        # and mode; a later folder's entries go over an earlier one's
        copies = " && ".join(f"find {STAGE}/{shlex.quote(n)} -mindepth 1 -maxdepth 1 -exec cp -a {{}} {quoted}/ ';'"
                             for n in names)
        fresh = sandbox.shell(f"{copies} && rm -rf {STAGE}", timeout=PREP_TIMEOUT_S, cwd="/")
    return None if fresh.ok else f"the task's {'/, '.join(names)}/ could not be put in {target}: " \
        f"{fresh.stderr.strip()[-500:]}"


def executed(script: str) -> list[str]:
    """The command that runs a task's script as Harbor 0.25 does: made executable, then run as a program from bash
    (`bash -c`), so its `#!` line picks the interpreter (a Python test.sh is Python) and a script without one runs
    in bash."""
    quoted = shlex.quote(script)
    return ["bash", "-c", f"chmod +x {quoted} && {quoted}"]


def verify(env: HarborEnv) -> dict[str, Any]:
    """Run the task's verifier, in the agent's sandbox or its own (`env.judge`), once the agent's processes have
    ended and its artifacts are collected; the verdict (`reward`, or `error`)."""
    sandbox = env.sandbox
    try:
        left = sandbox.end_processes()
    except SandboxUnsupported as exc:
        return {"error": f"the agent's processes could not be ended before the verifier ran: {exc}"}
    if left:
        return {"error": f"{left} process(es) the agent left were still alive after being killed: the verifier "
                         "did not run"}
    mode = {"verifier_mode": "separate" if env.separate else "shared"}
    manifest = [] if env.collected is None else collect(sandbox, env.artifacts, env.collected, env.declared)
    where = sandbox
    if env.separate:
        if env.judge is None or env.collected is None:
            return {**mode, "error": "the separate verifier was given no sandbox of its own, or nowhere to keep "
                                     "the artifacts: it did not run"}
        if (problem := seed(env.judge, env.artifacts, env.collected, manifest)) is not None:
            return {**mode, "error": problem}
        where = env.judge
    clear = f"rm -rf {REWARDS} && mkdir -p {REWARDS} /logs/agent && "
    if env.separate and env.bundled:  # as Harbor 0.25: a verifier's own image holds its tests
        made = where.shell(clear.removesuffix(" && "), timeout=PREP_TIMEOUT_S, cwd="/")
        if not made.ok:
            return {**mode, "error": f"{REWARDS} could not be made afresh: {made.stderr.strip()[-500:]}"}
    elif (problem := place(where, env.task_dir, env.tests, "/tests", clear)) is not None:
        return {**mode, "error": problem}
    ran = where.exec(executed("/tests/test.sh"), timeout=env.verifier_timeout, cwd=workdir(where),
                     env=env.verifier_env)
    facts = {**mode, "exit_code": ran.exit_code, "seconds": round(ran.duration, 3), "output": _tail(ran)}
    if ran.timed_out:
        return {**facts, "error": f"the verifier did not end within its timeout_sec ({env.verifier_timeout:g} s)"}
    try:
        found = reward(where)
    except ValueError as exc:
        return {**facts, "error": str(exc)}
    return {**facts, **found}


def reward(sandbox: Sandbox) -> dict[str, Any]:
    """The reward test.sh wrote, as Harbor reads it: reward.json first, else reward.txt. ValueError: none, or
    not a number."""
    for name in ("reward.json", "reward.txt"):
        try:
            text = sandbox.read_file(f"{REWARDS}/{name}", max_bytes=MAX_REWARD_BYTES).decode(errors="replace").strip()
        except SandboxFileNotFound:
            continue
        except SandboxOutputLimit:
            raise ValueError(f"the verifier's {REWARDS}/{name} is larger than {MAX_REWARD_BYTES} bytes") from None
        if not text:
            raise ValueError(f"the verifier's {REWARDS}/{name} is empty")
        if name == "reward.txt":
            if not NUMBER.fullmatch(text):
                raise ValueError(f"the verifier's {REWARDS}/{name} holds {text[:80]!r}, not a number")
            return {"reward": _number(float(text), name), "source": name}
        try:
            rewards = json.loads(text, parse_constant=_not_finite)
        except ValueError as exc:
            raise ValueError(f"the verifier's {REWARDS}/{name} is not JSON of finite numbers ({exc})") from None
        if not isinstance(rewards, dict):  # Harbor's VerifierResult takes an object alone: a bare 1 is no reward
            raise ValueError(f"the verifier's {REWARDS}/{name} holds {text[:80]!r}, not an object of rewards")
        if not rewards:
            raise ValueError(f"the verifier's {REWARDS}/{name} holds no value")
        if len(rewards) > MAX_REWARDS or any(len(key) > MAX_NAME for key in rewards):
            raise ValueError(f"the verifier's {REWARDS}/{name} has {len(rewards)} values: at most {MAX_REWARDS}, "
                             f"named in at most {MAX_NAME} characters")
        numbers = {key: _number(value, name) for key, value in rewards.items()}
        if "reward" not in numbers and len(numbers) > 1:  # Harbor's primary reward: none, each value is kept
            return {"rewards": numbers, "source": name}
        return {"reward": numbers["reward"] if "reward" in numbers else next(iter(numbers.values())),
                "rewards": numbers, "source": name}
    raise ValueError(f"the verifier wrote no {REWARDS}/reward.txt nor reward.json")


def _not_finite(word: str) -> Any:
    raise ValueError(f"{word} is not a finite number")


def _number(value: Any, name: str) -> float:
    """`value` (parsed) as a reward: a finite int or float (a JSON true or false is 1 or 0, as Harbor's reading has
    it), never a string or anything else."""
    if not isinstance(value, int | float):
        raise ValueError(f"the verifier's {REWARDS}/{name} holds {str(value)[:80]!r}, not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"the verifier's {REWARDS}/{name} holds {str(value)[:80]}, not a finite number")
    return number


def _tail(result: ExecResult) -> str:
    return (result.stdout[-1500:] + ("\n" + result.stderr[-1500:] if result.stderr.strip() else "")).strip()


def prepare(sandbox: Sandbox, check: dict[str, Any] | None) -> None:
    """Before the agent's turns: Harbor's folders the agent writes to (/logs/agent, /logs/artifacts: mounted and
    there from the start in Harbor's containers), then the task's healthcheck, if it has one."""
    made = sandbox.shell(f"mkdir -p /logs/agent {CONVENTION}", timeout=PREP_TIMEOUT_S, cwd="/")
    if not made.ok:
        raise InfraError(f"Harbor's /logs folders could not be made in the sandbox: {made.stderr.strip()[-300:]}")
    if check:
        healthcheck(sandbox, check)


def healthcheck(sandbox: Sandbox, check: dict[str, Any]) -> None:
    """The task's [environment.healthcheck], before the agent's turns, as Harbor runs it: its command until it
    passes once; a failure in the first start_period_sec is not counted (tried again after start_interval_sec),
    after it `retries` failures in a row fail it (tried again after interval_sec). Failed: an InfraError naming the
    command and its last output (Harbor retries such a trial)."""
    started = time.monotonic()
    failures = 0
    while True:
        starting = time.monotonic() < started + float(check["start_period_sec"])  # asked before it runs, as Harbor
        ran = sandbox.shell(check["command"], timeout=float(check["timeout_sec"]), cwd=workdir(sandbox))
        if ran.ok:
            return
        if starting:
            time.sleep(max(float(check["start_interval_sec"]), 0.0))
            continue
        failures += 1
        if failures >= int(check["retries"]):
            said = f"exit code {ran.exit_code}" + (" (timed out)" if ran.timed_out else "")
            raise InfraError(f"the task's healthcheck failed {failures} time(s) in a row ({said}): "
                             f"{check['command']!r}; its output: {_tail(ran)[-300:]!r}")
        time.sleep(max(float(check["interval_sec"]), 0.0))
