"""Where a Harbor task's verifier runs and as whom, its artifacts and users checked at load (Harbor 0.25's
harbor/models/task/verifier_mode.py and config.py, read from its wheel).

- The mode: `[verifier] environment_mode` as named, else "separate" when `[verifier.environment]` is given, else
  "shared". Shared: the verifier runs in the agent's sandbox once every process of the agent's has ended.
  Separate: in a judge's sandbox of the instance's own (`JudgeSandbox`: a fresh container of its image,
  started beside the agent's and reached by the host alone), seeded with the declared artifacts only
  (artifacts.py); its resources are `[verifier.environment]`'s where given, else the task's `[environment]`'s; its
  network is none when that environment or `[verifier] network_mode` says "no-network", else the run's --network.
  Its image is the task's, or one of its own as Harbor 0.25 resolves it (`image`): `[verifier.environment]
  docker_image`, an image the engine must have (no registry is asked: the preflight refuses it, exit 2), else the
  build context tests/ when it holds a Dockerfile, built as a task's image is (task_images.py), within the
  task's [environment] build_timeout_sec (Harbor's bound of the verifier's start too). Such an image holds its
  tests itself: /tests is the image's, nothing is copied there. A tests/docker-compose.yaml without a Dockerfile
  is refused.
- Users: `[agent] user` is who the agent's sandbox runs as (its service and every command), `[verifier] user` who
  the separate verifier's runs as; undeclared, the image's USER (Harbor's default). A sandbox cannot switch users
  (every capability is dropped), so a shared verifier runs as the agent's user: a task whose two users may differ
  in shared mode is refused, naming the fix.
- Artifacts: a source is an absolute path without `..` (not `/`); a destination a relative path without `..`, not
  manifest.json; an entry of another compose service is refused (one sandbox is one container), as are
  `[[verifier.collect]]` hooks.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from harness.datasets.model import JudgeSandbox
from harness.sandbox.contract import ENGINE_IMAGE

MANIFEST = "manifest.json"


def judge_sandbox(config: Any, folder: Path) -> JudgeSandbox | None:
    """The separate verifier's sandbox of a task (`config`: dataset.TaskConfig), or None in shared mode."""
    verifier = config.verifier
    if not verifier.separate():
        return None
    own = verifier.environment
    place = own if own is not None else config.environment
    modes = {place.network_mode, verifier.network_mode}
    none = "no-network" in modes or place.allow_internet is False
    return JudgeSandbox(cpus=own.cpus if own is not None else None,
                        memory=own.memory_size() if own is not None else None,
                        network="none" if none else None, user=user(verifier.user), image=image(config, folder),
                        build_timeout=config.environment.build_timeout_sec)  # as Harbor: the task's


def image(config: Any, folder: Path) -> str | None:
    """The separate verifier's image of its own, as Harbor resolves it: `[verifier.environment] docker_image` (an
    image the engine has), else the build context tests/ when it holds a Dockerfile; None: the task's image. Its
    tests are then the image's own /tests (Harbor copies none in)."""
    own = config.verifier.environment
    if own is not None and own.docker_image:
        return ENGINE_IMAGE + own.docker_image
    tests = folder / "tests"
    return str(tests.resolve()) if (tests / "Dockerfile").is_file() else None


def user(value: str | int | None) -> str | None:
    return None if value is None else str(value)


def problems(config: Any, folder: Path, raw: dict[str, Any]) -> list[str]:
    """What of the task's verifier mode, users and artifacts the harness cannot run as Harbor does."""
    found = []
    verifier, own = config.verifier, config.verifier.environment
    if verifier.environment_mode == "shared" and own is not None:
        found.append("verifier.environment_mode \"shared\" with a [verifier.environment]: name one mode (Harbor "
                     "refuses this too)")
    if verifier.separate():
        if not (own is not None and own.docker_image) and (folder / "tests" / "docker-compose.yaml").is_file() \
                and not (folder / "tests" / "Dockerfile").is_file():
            found.append("tests/ holds a docker-compose.yaml: a verifier environment of several containers is not "
                         "supported (one sandbox is one container; a tests/Dockerfile is)")
        if own is not None and own.network_mode == "allowlist":
            found.append("verifier.environment.network_mode \"allowlist\" is not supported: use no-network or public")
    elif user(verifier.user) != user(config.agent.user):
        found.append(f"[verifier] user {verifier.user!r} and [agent] user {config.agent.user!r} differ (None: the "
                     "image's USER) in the shared verifier mode: a sandbox cannot switch users, so its verifier runs "
                     "as the agent's; declare the same user, or environment_mode = \"separate\"")
    if raw.get("verifier", {}).get("collect"):
        found.append("[[verifier.collect]] hooks are not supported (they run in compose services)")
    for index, item in enumerate(config.artifacts):
        found.extend(f"artifacts[{index}]: {problem}" for problem in _artifact(item))
    return found


def _artifact(item: Any) -> list[str]:
    source = item if isinstance(item, str) else item.source
    found = []
    parts = PurePosixPath(source).parts
    if not source.startswith("/") or len(parts) < 2:
        found.append(f"source {source!r} is not an absolute path below / (where the sandbox's files are)")
    if ".." in parts:
        found.append(f"source {source!r} has a '..' component")
    if isinstance(item, str):
        return found
    if item.service not in (None, "main"):
        found.append(f"service {item.service!r}: an artifact of another compose service is not supported (one "
                     "sandbox is one container)")
    if item.destination:
        destination = PurePosixPath(item.destination)
        if "\\" in item.destination or destination.is_absolute() or ".." in destination.parts:
            found.append(f"destination {item.destination!r} is not a relative path without '..'")
        elif item.destination.rstrip("/") == MANIFEST:
            found.append(f"destination {MANIFEST!r} is the manifest's")
    return found
