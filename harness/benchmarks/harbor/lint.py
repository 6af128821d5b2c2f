"""A Harbor task folder checked at load, as `harbor lint` checks one, before anything reads its files for the run or
starts a container: each check returns its problems (strings naming the file or key), the loader
(harness/benchmarks/harbor/dataset.py) raises them all at once (exit 2).

- `files`: every file of the folder, once. A link that leads out of it (or nowhere, or round in a cycle), a FIFO, a
  socket or a device is refused naming the file: the host never reads a file the task did not hold
  (an instruction.md linked to a host file would become the question the model is sent).
- `unknown_keys`: every key of task.toml against Harbor 0.25's schema (`KNOWN`, its task models' field names,
  aliases and legacy names: harbor/models/task/config.py); an unknown one is named with the nearest known one
  (difflib, as `harbor lint` does), so a typo such as `[verifer]` is not run silently with defaults.
- `engine_values`: what the engine cannot give, whatever Harbor accepts: a timeout that is no finite number of
  seconds (or more than MAX_SECONDS), CPUs that are no finite number, memory below the sandbox's least, a GPU or
  TPU, a Windows image. (More CPUs or memory than the engine has is the
  preflight's, which asks the engine: runner/preflight.py `check_capacity`.)
"""

from __future__ import annotations

import difflib
import math
import os
import stat
from pathlib import Path
from typing import Any

from harness.sandbox.contract import parse_size

MAX_SECONDS = 30 * 86400.0  # a timeout beyond this is a mistake (and more than some timers can hold)
MIN_MEMORY = 6 * 2**20  # the sandbox's own least (SandboxSpec)

_HEALTH = dict.fromkeys(("command", "interval_sec", "timeout_sec", "start_period_sec", "start_interval_sec",
                         "retries"))
_MCP = dict.fromkeys(("name", "transport", "url", "command", "args", "headers"))
_ENVIRONMENT: dict[str, Any] = {
    **dict.fromkeys(("network_mode", "allowed_hosts", "build_timeout_sec", "docker_image", "os", "cpus",
                     "memory_mb", "storage_mb", "gpus", "gpu_types", "env", "skills_dir", "workdir",
                     "allow_internet", "memory", "storage")),
    "tpu": dict.fromkeys(("type", "topology")), "mcp_servers": _MCP, "healthcheck": _HEALTH}
_AGENT = dict.fromkeys(("network_mode", "allowed_hosts", "timeout_sec", "user"))
_VERIFIER: dict[str, Any] = {
    **dict.fromkeys(("network_mode", "allowed_hosts", "timeout_sec", "env", "user", "environment_mode")),
    "environment": _ENVIRONMENT, "collect": dict.fromkeys(("command", "service", "timeout_sec", "user"))}
_ARTIFACT = dict.fromkeys(("source", "destination", "exclude", "service"))
# A key's value: None (anything: a value, or a table whose keys are free, such as [metadata] or env), or the
# keys of the table (or of each table of an array of them) it holds.
KNOWN: dict[str, Any] = {
    **dict.fromkeys(("schema_version", "version", "metadata", "source", "multi_step_reward_strategy")),
    "task": {**dict.fromkeys(("name", "version", "description", "keywords")),
             "authors": dict.fromkeys(("name", "email"))},
    "verifier": _VERIFIER, "agent": _AGENT, "environment": _ENVIRONMENT, "solution": dict.fromkeys(("env",)),
    "steps": {**dict.fromkeys(("name", "min_reward")), "agent": _AGENT, "verifier": _VERIFIER,
              "healthcheck": _HEALTH, "artifacts": _ARTIFACT},
    "artifacts": _ARTIFACT}


def files(folder: Path) -> list[str]:
    """Every file under `folder` (resolved), once: a problem for each link that leads out of it or nowhere and
    each entry that is neither a regular file nor a folder, naming it by its path in the folder."""
    problems: list[str] = []

    def visit(path: Path) -> None:
        name = path.relative_to(folder).as_posix()
        try:
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                target = Path(os.path.realpath(path))
                if not target.exists():
                    problems.append(f"{name} is a link to nothing (its target is missing, or a cycle)")
                elif not target.is_relative_to(folder):
                    problems.append(f"{name} is a link to {target}, outside the task folder: copy the file in")
                return  # a link inside: its target is visited where it is
            if stat.S_ISDIR(info.st_mode):
                for child in sorted(path.iterdir()):
                    if child.name != ".git":
                        visit(child)
            elif not stat.S_ISREG(info.st_mode):
                problems.append(f"{name} is not a regular file or folder")
        except OSError as exc:
            problems.append(f"{name} cannot be read: {exc.strerror or exc}")

    visit(folder)
    return problems


def unknown_keys(raw: dict[str, Any], known: dict[str, Any] = KNOWN, prefix: str = "") -> list[str]:
    """A problem for each key of task.toml (`raw`) that Harbor's schema does not know, with the nearest known."""
    problems = []
    for key, value in raw.items():
        where = f"{prefix}.{key}" if prefix else key
        if key not in known:
            nearest = difflib.get_close_matches(key, list(known), n=1)
            section = not prefix and isinstance(value, dict)
            shown = (lambda k: f"[{k}]") if section else (lambda k: f"{prefix}.{k}" if prefix else k)
            problems.append(f"unknown {'section' if section else 'key'} {shown(key)}"
                            + (f" (did you mean {shown(nearest[0])}?)" if nearest else ""))
        elif isinstance(child := known[key], dict):
            tables = [(where, value)] if isinstance(value, dict) else [
                (f"{where}[{index}]", item) for index, item in enumerate(value if isinstance(value, list) else [])]
            for at, table in tables:
                if isinstance(table, dict):
                    problems.extend(unknown_keys(table, child, at))
    return problems


def engine_values(raw: dict[str, Any]) -> list[str]:
    """A problem for each value of task.toml (`raw`, already of the right types) the engine cannot give."""
    def table(*keys: str) -> dict[str, Any]:
        found: Any = raw
        for key in keys:
            found = found.get(key) if isinstance(found, dict) else None
        return found if isinstance(found, dict) else {}

    problems = []
    environment, verifier = table("environment"), table("verifier")
    for where, value in (("agent.timeout_sec", table("agent").get("timeout_sec")),
                         ("verifier.timeout_sec", verifier.get("timeout_sec")),
                         ("environment.build_timeout_sec", environment.get("build_timeout_sec"))):
        if isinstance(value, (int, float)) and not math.isfinite(value):
            problems.append(f"{where} {value} is not a finite number of seconds")
        elif isinstance(value, (int, float)) and value > MAX_SECONDS:
            problems.append(f"{where} {value:g} is more than {MAX_SECONDS:g} s (30 days)")
    cpus = environment.get("cpus")
    if isinstance(cpus, float) and not math.isfinite(cpus):
        problems.append(f"environment.cpus {cpus} is not a finite number of CPUs")
    memory, memory_mb = environment.get("memory"), environment.get("memory_mb")
    if isinstance(memory, str) and 0 <= parse_size(memory.lower().removesuffix("b")) < MIN_MEMORY:
        problems.append(f"environment.memory {memory!r} is no size of at least 6 MB")
    if isinstance(memory_mb, int) and 0 < memory_mb * 2**20 < MIN_MEMORY:
        problems.append(f"environment.memory_mb {memory_mb} is no size of at least 6 MB")
    if isinstance(gpus := environment.get("gpus"), int) and gpus > 0:
        problems.append(f"environment.gpus {gpus}: a sandbox gets no GPU")
    if environment.get("tpu") is not None:
        problems.append("environment.tpu: a sandbox gets no TPU")
    if str(environment.get("os", "linux")).lower() != "linux":
        problems.append(f"environment.os \"{environment['os']}\": sandboxes are Linux containers")
    return problems
