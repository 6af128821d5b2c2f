"""The entry point of a task's own image (harness/sandbox/docker/task_images.py): seed the task's working
directory, then become sandboxd (PID 1 stays this process: exec).

Where the engine has no storage quota the sandbox's root filesystem is read-only and the task's working
directory is a size-limited tmpfs mount (harness/sandbox/docker/storage.py), empty at start: the image's own
files of that directory, kept at build time in /opt/harness/seed, are copied into it first. Where the whole
filesystem is writable (a quota) the directory already holds them and is left alone.
"""

import os
import shutil
import sys

HERE = "/opt/harness"


def seed() -> None:
    with open(os.path.join(HERE, "workdir"), encoding="utf-8") as handle:
        workdir = handle.read().strip()
    source = os.path.join(HERE, "seed")
    if workdir in ("", "/") or not os.path.isdir(source) or (os.path.isdir(workdir) and os.listdir(workdir)):
        return
    _copy_into(source, workdir)


def _copy_into(source: str, target: str) -> None:
    """The entries of `source` into the folder `target`, whose own owner and mode stay (a mount's root, which a
    sandbox running as another user than root, a Harbor task's [agent] user, may not change)."""
    for name in os.listdir(source):
        path = os.path.join(source, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.copytree(path, os.path.join(target, name), symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(path, os.path.join(target, name), follow_symlinks=False)


def seed_volumes(listed: str = "volumes", kept: str = "seed-volumes") -> None:
    """The image's VOLUMEs are size-limited tmpfs mounts too, empty at start: their files, kept at build time in
    /opt/harness/seed-volumes/N, are copied in (N: the place's line in /opt/harness/volumes). So are Harbor's
    places the image fills (/tests of a verifier's own image: `places`, `seed-places`)."""
    try:
        with open(os.path.join(HERE, listed), encoding="utf-8") as handle:
            declared = handle.read().splitlines()
    except FileNotFoundError:
        return
    for number, path in enumerate(declared):
        source = os.path.join(HERE, kept, str(number))
        if os.path.isdir(source) and os.path.isdir(path) and not os.listdir(path):
            _copy_into(source, path)


if __name__ == "__main__":
    seed()
    seed_volumes()
    seed_volumes("places", "seed-places")
    os.execv(sys.executable, [sys.executable, "-u", os.path.join(HERE, "sandboxd.py")])
