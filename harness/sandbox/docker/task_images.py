"""A task's own image: a build context a dataset row names (`Instance.image` as a path, e.g. a Harbor task's
environment/), built offline on this engine and made a sandbox without changing the task's environment.

Two builds, each tagged by content and made once (a tag present is taken as it is):

- the task's image, its context built as it is (`harness-taskenv:<tree hash of the context>`): nothing added
  to its context, its FROM lines checked first: a base that is neither on the engine nor pullable is an
  InputError naming the task and the base, before anything is built or started;
- the sandbox of it (`harness-task:<context hash><injection hash>`): FROM the task's image, with sandboxd and
  the entry point of images/task/ added under /opt/harness and the entry point made PID 1. The task's USER,
  WORKDIR and ENV stay as the task set them; its ENTRYPOINT/CMD give way to sandboxd. Its WORKDIR's files are
  kept in /opt/harness/seed for the entry point to copy into the writable mount the sandbox gets there, and
  the label TASK_LABEL lists the places its sandboxes may write (docker/storage.py: size-limited tmpfs).

sandboxd is a Python script and every command goes through bash: an image without python3 or bash is refused
(InputError naming the task), not given an interpreter of ours. An interpreter copied in would have to match
the image's C library and architecture (no static build is at hand offline), and would put a python3 on the
PATH the task did not have, so the agent and the verifier would see another environment than the task's.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import tempfile
import time
from pathlib import Path

from filelock import FileLock, Timeout

from harness.errors import EngineNotFound, InfraError, InputError
from harness.fsutil import tree_hash
from harness.sandbox.contract import ENGINE_IMAGE
from harness.sandbox.docker import engine, images
from harness.settings import settings

TASK_LABEL = "harness.task.writable"  # the places its sandboxes write, space-separated, its working directory first
# Harbor's own places in a task's container: the verifier's tests and its reward (/logs/verifier), the oracle's
# solution, the agent's logs.
TASK_PLACES = ("/logs", "/tests", "/solution")
DEFAULT_BUILD_TIMEOUT_S = 600.0  # Harbor's default build_timeout_sec
# The engine's image lock is waited for at most this long, or the build's own seconds when longer: another
# process's build (the sandbox image's takes minutes) holds it meanwhile, never forever.
LOCK_WAIT_S = 1800.0
CHECK = "command -v python3 >/dev/null && command -v bash >/dev/null"


def engine_image(name: str) -> str | None:
    """The engine's image an image name `ENGINE_IMAGE + IMAGE` names (a Harbor verifier's docker_image), else
    None."""
    return name.removeprefix(ENGINE_IMAGE) if name.startswith(ENGINE_IMAGE) else None


def is_context(image: str) -> bool:
    """Whether an `Instance.image` names a build context (a path) rather than a harness image (images/NAME)."""
    return "/" in image and engine_image(image) is None


def check_image(name: str) -> None:
    """The provider's `check_image` on this engine: a task's build context is checked (check_task), an engine's
    image must be on it (no registry is asked), a harness image needs nothing."""
    if (image := engine_image(name)) is not None:
        engine_tag(image)
    elif is_context(name):
        check_task(Path(name))


def image_of(name: str, *, log=print, build_timeout: float | None = None) -> str:
    """The provider's `image_of` on this engine: a task's own image (build_task), the sandbox of an engine's image
    (build_on), or a harness image images/NAME."""
    if (image := engine_image(name)) is not None:
        return build_on(image, log=log, build_timeout=build_timeout)
    if is_context(name):
        return build_task(Path(name), log=log, build_timeout=build_timeout)
    return images.build_named(name, log=log)


def bases(dockerfile: str) -> list[str]:
    """The images a Dockerfile's FROM lines start from (stages named by AS and `scratch` left out), with the
    ARGs declared before the first FROM substituted."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    found: list[str] = []
    for line in re.sub(r"\\\r?\n", " ", dockerfile).splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        op = words[0].upper()
        if op == "ARG" and not found and not stages and len(words) > 1:
            name, _, default = words[1].partition("=")
            args[name] = default.strip("\"'")
        elif op == "FROM":
            rest = [word for word in words[1:] if not word.startswith("--")]
            if not rest:
                continue
            image = re.sub(r"\$\{(\w+)(?::?-([^}]*))?\}|\$(\w+)",
                           lambda m: args.get(m.group(1) or m.group(3)) or m.group(2) or "", rest[0])
            if image and image.lower() not in stages and image != "scratch":  # "": an ARG given at build time
                found.append(image)
            if len(rest) >= 3 and rest[1].lower() == "as":
                stages.add(rest[2].lower())
    return found


def _injection_hash() -> str:
    digest = hashlib.sha256((tree_hash(images.images_dir() / "task") + _dockerfile("/w")).encode())
    digest.update((images.images_dir() / "sandbox" / "sandboxd.py").read_bytes())
    return digest.hexdigest()[:6]


def task_tag(context: Path) -> str:
    return f"harness-task:{tree_hash(context)[:6]}{_injection_hash()}"


def _task(context: Path) -> Path:
    """The task a build context is of: a Harbor task's environment/, or its tests/ (its verifier's image)."""
    return context.parent if context.name in ("environment", "tests") else context


def check_task(context: Path) -> None:
    """InputError naming the task when its image cannot be built here: no Dockerfile, or a base that is neither
    on the engine nor pullable. Nothing is built."""
    context, dockerfile = context.resolve(), context.resolve() / "Dockerfile"
    if not dockerfile.is_file():
        raise InputError(f"task {_task(context)}: no Dockerfile in its build context {context}")
    if images._exists(task_tag(context)):
        return
    for base in bases(dockerfile.read_text(encoding="utf-8", errors="replace")):
        if not images._exists(base) and (settings().no_pull or images.pull(base) is not None):
            raise InputError(f"task {_task(context)}: its Dockerfile starts FROM {base}, which this engine does not "
                             f"have and cannot pull (no registry answers): build or load {base} first")


def build_task(context: Path, *, log=print, build_timeout: float | None = None) -> str:
    """Make the sandbox image of the task whose build context is `context` present; return its tag. Its builds take
    at most `build_timeout` seconds (DEFAULT_BUILD_TIMEOUT_S when None; past it: InputError naming the task), and
    the engine's image lock, which another process's build may hold, is waited for at most LOCK_WAIT_S or that
    long (InfraError)."""
    context = context.resolve()
    task, tag = _task(context), task_tag(context)
    if images._exists(tag):
        return tag
    check_task(context)
    own = f"harness-taskenv:{tree_hash(context)}"

    def made(deadline: float, seconds: float) -> None:
        if not images._exists(own):
            log(f"building task {task.name}'s image {own} ...")
            _build(task, lambda: images._stream_build(str(context), own, {}, deadline), "its Dockerfile does not build",
                   seconds)

    return _sandboxed(task, own, tag, made, log, build_timeout)


def engine_tag(image: str) -> str:
    """The tag of the sandbox of the engine's image `image` (its content's); InputError when the engine lacks it."""
    try:
        found = engine.call("image inspect", lambda: engine.client().api.inspect_image(image))
    except EngineNotFound:
        raise InputError(f"the image {image} is not on this engine (no registry is asked): build or load it "
                         "first") from None
    return f"harness-task:{found['Id'].removeprefix('sha256:')[:6]}{_injection_hash()}"


def build_on(image: str, *, log=print, build_timeout: float | None = None) -> str:
    """Make the sandbox of the engine's image `image` (no registry is asked: InputError when it is not there)
    present, as a task's own image's is; return its tag."""
    tag = engine_tag(image)
    if images._exists(tag):
        return tag
    return _sandboxed(Path(image), image, tag, lambda deadline, seconds: None, log, build_timeout)


def _sandboxed(task: Path, own: str, tag: str, made, log, build_timeout: float | None) -> str:
    """The sandbox `tag` of the task's image `own`, after `made(deadline, seconds)` has made `own` present: built
    under the engine's image lock, within `build_timeout` seconds in all."""
    seconds = build_timeout or DEFAULT_BUILD_TIMEOUT_S
    lock = FileLock(str(images.lock_path()), timeout=max(seconds, LOCK_WAIT_S))
    try:
        lock.acquire()
    except Timeout:
        raise InfraError(f"task {task}: the engine's image lock {lock.lock_file} was held by another build for "
                         f"longer than {max(seconds, LOCK_WAIT_S):g} s: is a build stuck elsewhere?") from None
    try:
        if images._exists(tag):
            return tag
        deadline = time.monotonic() + seconds
        made(deadline, seconds)
        config = engine.call("image inspect", lambda: engine.client().api.inspect_image(own))["Config"] or {}
        workdir, declared = config.get("WorkingDir") or "/", sorted(config.get("Volumes") or {})
        log(f"building {tag} (sandboxd into {own}) ...")
        with tempfile.TemporaryDirectory(prefix="harness-task-") as ctx:
            shutil.copytree(images.images_dir() / "task", ctx, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            shutil.copy(images.images_dir() / "sandbox" / "sandboxd.py", ctx)
            Path(ctx, "workdir").write_text(workdir + "\n")
            Path(ctx, "volumes").write_text("".join(f"{path}\n" for path in declared))
            Path(ctx, "places").write_text("".join(f"{path}\n" for path in TASK_PLACES if path != workdir))
            Path(ctx, "Dockerfile").write_text(_dockerfile(workdir, declared))
            _build(task, lambda: images._stream_build(ctx, tag, {"TASK_IMAGE": own}, deadline), "", seconds)
    finally:
        lock.release()
    return tag


def _build(task: Path, build, problem: str, seconds: float) -> None:
    """A build of the task's; its failure is the task's (InputError), unless the engine is the trouble."""
    try:
        engine.call("build", build, retries=0)
    except engine.BuildTimedOut as late:
        raise InputError(f"task {task}: its image did not build within its build_timeout_sec ({seconds:g} s; "
                         f"task.toml's [environment], else {DEFAULT_BUILD_TIMEOUT_S:g}): {late}") from None
    except engine.BuildLacksTools:
        raise InputError(f"task {task}: its image has no python3 or no bash, which the harness's sandbox "
                         "service needs: install them in its Dockerfile") from None
    except engine.BuildFailed as failed:
        if not problem:
            raise
        raise InputError(f"task {task}: {problem}: {failed}") from None


def _dockerfile(workdir: str, declared: list[str] | tuple[str, ...] = ()) -> str:
    """The sandbox of a task's image. `declared`: its VOLUMEs, which its sandboxes get as size-limited tmpfs
    (storage.volumes): what the image holds there is kept in /opt/harness/seed-volumes/N (N: the place's line in
    /opt/harness/volumes) for the entry point to copy in, as its working directory's is."""
    seeded = workdir not in ("", "/")
    writable = " ".join(dict.fromkeys(((workdir,) if seeded else ("/workspace",)) + TASK_PLACES))  # workdir first
    lines = ["ARG TASK_IMAGE", "FROM ${TASK_IMAGE} AS task"]
    checked = f"RUN {CHECK} || {{ echo 'the image has no python3 or no bash'; exit 3; }}"
    if declared:  # a path the image declares but never made is no error: nothing to seed there
        copy = ("import os, shutil, sys; [shutil.copytree(p, f\"/opt/harness-seed/{n}\", symlinks=True) "
                "for n, p in enumerate(sys.argv[1:]) if os.path.isdir(p)]")
        lines += ["FROM ${TASK_IMAGE} AS volumes", "USER root", checked,
                  f"RUN mkdir -p /opt/harness-seed && python3 -c {shlex.join([copy, *declared])}"]
    # Harbor's places the image itself fills (a verifier's image holds its tests in /tests): their files, kept in
    # /opt/harness/seed-places/N (N: the place's line in /opt/harness/places), are copied into the sandbox's
    places = [place for place in TASK_PLACES if place != workdir]
    keep = ("import os, shutil, sys; [shutil.copytree(p, f\"/opt/harness-seed/{n}\", symlinks=True) "
            "for n, p in enumerate(sys.argv[1:]) if os.path.isdir(p) and os.listdir(p)]")
    lines += ["FROM ${TASK_IMAGE} AS places", "USER root", checked,
              f"RUN mkdir -p /opt/harness-seed && python3 -c {shlex.join([keep, *places])}"]
    lines += ["FROM ${TASK_IMAGE}", checked,
              f"COPY sandboxd.py entry.py workdir places {'volumes ' if declared else ''}/opt/harness/",
              "COPY --from=places /opt/harness-seed/ /opt/harness/seed-places/"]
    if declared:
        lines.append("COPY --from=volumes /opt/harness-seed/ /opt/harness/seed-volumes/")
    if seeded:
        lines.append(f'COPY --from=task ["{workdir}", "/opt/harness/seed/"]')
    lines += ['ENTRYPOINT ["python3", "/opt/harness/entry.py"]', "CMD []", f'LABEL {TASK_LABEL}="{writable}"']
    return "\n".join(lines) + "\n"
