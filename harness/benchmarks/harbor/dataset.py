"""Harbor tasks (the task format of Harbor and Terminal-Bench 2) into `Instance`s: `--dataset harbor:PATH`, PATH a
task folder or a folder of them (each sub-folder holding a task.toml, in name order).

A task folder holds ``task.toml``, ``instruction.md`` (the question), ``environment/`` (the build context of
its sandbox's image: a Dockerfile), ``tests/`` (``test.sh``: the verifier, run in the sandbox after the agent)
and, optionally, ``solution/`` (``solve.sh``: what `--agent oracle` runs). Of task.toml: ``[agent] timeout_sec``
(the agent's wall seconds), ``[verifier] timeout_sec`` and ``env``, ``[solution] env``, ``[environment] cpus``,
``memory`` ("2G") or ``memory_mb``, ``[environment] network_mode`` (or an ``[agent]`` override, or the older
``allow_internet = false``): "no-network" gives the task's sandbox no network whatever --network; "public" gets
the run's --network (a task narrows the policy, never widens it); "allowlist" is refused. A multi-step task
(``[[steps]]``: steps.py) is one instance, its later steps' instructions in its metadata (`STEPS`); a task's MCP
servers (``[[environment.mcp_servers]]``: mcp.py) are its instance's own. Harbor's defaults where a field is missing
(Harbor 0.25's task models, read from its wheel).
Everything else (metadata, tags, GPUs, storage) is kept in the instance's metadata, not enforced: --disk holds.

instance_id = the folder's name; question = instruction.md; answer "1": a solved task's reward; image = the
environment/ folder's absolute path (built by the provider: harness/sandbox/docker/task_images.py); timeout =
the agent's and the verifier's seconds together (the agent process runs both; the harbor tool family stops the
agent at its own); cpus and memory from [environment]. Nothing is copied into the sandbox before the agent ends:
tests/ and solution/ stay on the host, read by the verifier (harness/benchmarks/harbor/environment.py) and the oracle.

Refused, every problem in one InputError naming the task folder: no task.toml or instruction.md, a task.toml
that is not TOML or has a field of the wrong type, no environment/Dockerfile, an environment/docker-compose.yaml
(Harbor runs its services beside the main container: one sandbox is one container), no tests/test.sh, a memory
that is no size; --split; and what lint.py finds first, as `harbor lint` would (a file that links out of the
folder, a key Harbor does not know, a value the engine cannot give). [environment] build_timeout_sec bounds the
build of the task's image (`Instance.build_timeout`).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.benchmarks.harbor import lint as harbor_lint
from harness.benchmarks.harbor import steps as harbor_steps
from harness.benchmarks.harbor import verifier_mode
from harness.benchmarks.harbor.mcp import McpServerConfig, servers
from harness.datasets.fingerprint import dataset_fingerprint
from harness.datasets.model import STEPS, Dataset, Instance
from harness.datasets.problems import raise_problems, refuse_split
from harness.environments.mcp_config import INSTANCE_KEY
from harness.errors import InputError
from harness.fsutil import tree_hash
from harness.sandbox.contract import parse_size

PREFIX = "harbor:"
COMPOSE = "environment/docker-compose.yaml"  # the one name Harbor 0.25 reads (a .yml it ignores, as the harness)
TARGET = "1"  # the reward of a solved task
PACKAGE_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*")  # [task] name, as Harbor's


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Timed(_Part):
    timeout_sec: float = Field(600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    network_mode: Literal["no-network", "public", "allowlist"] | None = None  # a phase's own (Harbor 0.25)
    user: str | int | None = None  # who the phase runs as (None: the image's USER)


class _Solution(_Part):
    env: dict[str, str] = Field(default_factory=dict)


class _Healthcheck(_Part):  # Harbor bounds none of these (a wait below 0 is none, retries below 1 are 1)
    command: str
    interval_sec: float = 5.0
    timeout_sec: float = Field(30.0, gt=0)
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


class _Environment(_Part):
    network_mode: Literal["no-network", "public", "allowlist"] = "public"
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)  # harness/benchmarks/harbor/mcp.py
    allow_internet: bool | None = None  # Harbor's older spelling of no-network (False)
    cpus: float = Field(1, gt=0)
    build_timeout_sec: float = Field(600.0, gt=0)
    memory: str | None = None
    memory_mb: int | None = Field(None, gt=0)
    healthcheck: _Healthcheck | None = None
    env: dict[str, str] = Field(default_factory=dict)  # the sandbox's: every command of the agent's, the verifier's
    workdir: str | None = None  # Harbor's override of the image's WORKDIR: where every command runs
    docker_image: str | None = None  # a prebuilt image (taken for [verifier.environment]: verifier_mode.py)

    def memory_size(self) -> str:
        if self.memory is not None:
            return self.memory.lower().removesuffix("b")
        return f"{self.memory_mb or 2048}m"


class _StepAgent(_Part):
    timeout_sec: float | None = Field(None, gt=0)  # None: the task's [agent] timeout_sec


class _Step(_Part):
    """One `[[steps]]` table (Harbor 0.25's StepConfig): its files are under steps/NAME/."""

    name: str = Field(min_length=1, max_length=255)
    agent: _StepAgent = Field(default_factory=_StepAgent)
    verifier: _Timed = Field(default_factory=_Timed)  # its timeout_sec is its own (600 s unset), as in Harbor
    min_reward: float | dict[str, float] | None = None


class _Verifier(_Timed):
    environment_mode: Literal["shared", "separate"] | None = None
    environment: _Environment | None = None  # its own container's (implies "separate")

    def separate(self) -> bool:
        """Harbor's resolution: the mode named, else "separate" when an environment is given, else shared."""
        return self.environment_mode == "separate" or (self.environment_mode is None and self.environment is not None)


class Artifact(_Part):
    source: str
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)
    service: str | None = None


class _Package(_Part):
    name: str | None = None

    @field_validator("name")
    @classmethod
    def _org_slash_name(cls, name: str | None) -> str | None:
        """Harbor 0.25 refuses a task whose name is not `org/name` (its loader skips such a folder of a dataset)."""
        if name is not None and (not PACKAGE_NAME.fullmatch(name) or ".." in name):
            raise ValueError(f"{name!r} is not Harbor's 'org/name' (letters, digits, '.', '_' and '-', each part "
                             "starting with a letter or digit, no '..')")
        return name


class TaskConfig(_Part):
    """task.toml: the fields the harness enforces; the rest is kept as it is."""

    version: str = "1.0"
    metadata: dict = Field(default_factory=dict)
    verifier: _Verifier = Field(default_factory=_Verifier)
    agent: _Timed = Field(default_factory=_Timed)
    environment: _Environment = Field(default_factory=_Environment)
    solution: _Solution = Field(default_factory=_Solution)
    task: _Package | None = None
    steps: list[_Step] | None = None  # a multi-step task (harness/benchmarks/harbor/steps.py)
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    artifacts: list[str | Artifact] = Field(default_factory=list)

    def network(self) -> Literal["none"] | None:
        """"none" when the task asks for no network (its sandbox gets none, whatever --network), else None: the
        run's policy (a task never widens it: "public" gets what the run allows)."""
        env, modes = self.environment, {self.environment.network_mode, self.agent.network_mode}
        return "none" if "no-network" in modes or env.allow_internet is False else None

    def refusals(self) -> list[str]:
        found = []
        if "allowlist" in {self.environment.network_mode, self.agent.network_mode, self.verifier.network_mode}:
            found.append("network_mode \"allowlist\" is not supported (the harness has no per-host allow list): "
                         "use no-network or public")
        for where, env in (("environment.env", self.environment.env), ("verifier.env", self.verifier.env),
                           ("agent.env", self.agent.env), ("solution.env", self.solution.env)):
            for name in (name for name, value in env.items() if "${" in value):
                found.append(f"{where} {name}: a ${{VAR}} is read from the host in Harbor; the harness passes no "
                             "host variable into a sandbox: write the value")
        return found


def _declares_steps(folder: Path) -> bool:
    """Whether the task.toml declares [[steps]] (read before the file's other checks)."""
    try:
        return bool(tomllib.loads((folder / "task.toml").read_text(encoding="utf-8")).get("steps"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


def detect(path: Path) -> Path | None:
    """`path` when it is a Harbor task folder or a folder of them, else None."""
    try:
        return path if path.is_dir() and ((path / "task.toml").is_file() or _tasks(path)) else None
    except OSError:
        return None


def _tasks(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if (p / "task.toml").is_file()) if path.is_dir() else []


def load(found: Path, split: str | None = None) -> Dataset:
    """Every task of the folder `found`; raises InputError listing every problem."""
    refuse_split(split, found)
    if not found.is_dir():
        raise InputError(f"--dataset {PREFIX}{found}: not a folder")
    folders = [found] if (found / "task.toml").is_file() else _tasks(found)
    if not folders:
        raise InputError(f"--dataset {PREFIX}{found}: no task.toml in it nor in any folder in it")
    problems: list[str] = []
    for folder in folders:
        if folder.is_symlink() and not folder.resolve().is_relative_to(found.resolve()):
            problems.append(f"task folder {folder} is a link to {folder.resolve()}, outside {found}")
    if problems:
        raise_problems(f"{found} (Harbor tasks)", problems)
    instances = [instance for folder in folders if (instance := _task(folder.resolve(), problems)) is not None]
    if problems:
        raise_problems(f"{found} (Harbor tasks)", problems)
    return Dataset(instances, dataset_fingerprint(instances))


def _task(folder: Path, problems: list[str]) -> Instance | None:
    found = len(problems)
    if unsafe := harbor_lint.files(folder):  # before any of its files is read
        problems.extend(f"task {folder}: {problem}" for problem in unsafe)
        return None
    stepped = bool(_declares_steps(folder))
    needed = ("environment/Dockerfile",) if stepped else ("instruction.md", "environment/Dockerfile", "tests/test.sh")
    for name in needed:
        if not (folder / name).is_file() and not (name == "environment/Dockerfile" and (folder / COMPOSE).exists()):
            problems.append(f"task {folder}: no {name}")
    if (folder / COMPOSE).exists():  # Harbor runs it (beside a Dockerfile too): its services are the task's
        problems.append(f"task {folder}: {COMPOSE}: a multi-container environment (docker-compose services beside "
                        "the main one) is not supported: one sandbox is one container (docs/guide.md, Harbor tasks)")
    try:
        raw = tomllib.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        problems.append(f"task {folder}: task.toml cannot be read: {exc}")
        return None
    problems.extend(f"task {folder}: task.toml: {problem}"
                    for problem in harbor_lint.unknown_keys(raw) + harbor_lint.engine_values(raw))
    try:
        config = TaskConfig.model_validate(raw)
    except ValidationError as exc:
        wrong = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        problems.append(f"task {folder}: task.toml: {wrong}")
        return None
    problems.extend(f"task {folder}: task.toml: {refusal}" for refusal in config.refusals())
    if config.steps:
        problems.extend(f"task {folder}: {problem}" for problem in harbor_steps.problems(folder, raw, config.steps))
    mcp, unserved = servers(config.environment.mcp_servers)
    problems.extend(f"task {folder}: task.toml: {problem}" for problem in unserved)
    problems.extend(f"task {folder}: task.toml: {problem}" for problem in verifier_mode.problems(config, folder, raw))
    if (workdir := config.environment.workdir) is not None and not workdir.startswith("/"):
        problems.append(f"task {folder}: task.toml: environment.workdir {workdir!r} is no absolute path")
    if parse_size(config.environment.memory_size()) < 0:
        problems.append(f"task {folder}: task.toml: environment.memory {config.environment.memory!r} is no size "
                        "(like 2G or 512M)")
    if len(problems) > found:
        return None
    metadata = {"task_dir": str(folder), "task_hash": tree_hash(folder),
                "agent_timeout": config.agent.timeout_sec, "verifier_timeout": config.verifier.timeout_sec,
                "verifier_env": config.verifier.env, "solution_env": config.solution.env,
                "artifacts": [a if isinstance(a, str) else a.model_dump(exclude_none=True) for a in config.artifacts],
                "separate": config.verifier.separate(),
                "verifier_image": bool(verifier_mode.image(config, folder)) and config.verifier.separate(),
                "healthcheck": h.model_dump() if (h := config.environment.healthcheck) else None,
                "tool_families": ["code", "mcp", "harbor"], **({INSTANCE_KEY: mcp} if mcp else {}),
                **{f"task_{k}": v for k, v in config.metadata.items()}}
    question, timeout = None, config.agent.timeout_sec + config.verifier.timeout_sec
    if config.steps:  # harness/benchmarks/harbor/steps.py
        question, *later = (harbor_steps.instruction(folder, step) for step in config.steps)
        steps = harbor_steps.described(folder, config)
        timeout = sum(s["agent_timeout"] * (1 + s["workdir"]) + s["verifier_timeout"] for s in steps)
        metadata.update({"harbor_steps": steps, STEPS: later,
                         "reward_strategy": config.multi_step_reward_strategy or "mean"})
    return Instance(instance_id=folder.name,
                    question=question or (folder / "instruction.md").read_text(encoding="utf-8"),
                    answer=TARGET, root=folder, image=str(folder / "environment"), timeout=timeout,
                    build_timeout=config.environment.build_timeout_sec,
                    cpus=config.environment.cpus, memory=config.environment.memory_size(), network=config.network(),
                    user=verifier_mode.user(config.agent.user), workdir=config.environment.workdir,
                    judge_sandbox=verifier_mode.judge_sandbox(config, folder),
                    env=config.environment.env,
                    metadata=metadata, benchmark="harbor")
