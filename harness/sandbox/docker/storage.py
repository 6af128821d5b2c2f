"""What agent code may write, and where it goes: the disk limit and the log cap.

A sandbox's writable space is `SandboxSpec.disk` (`harness run --disk`), on by default.
Two backends, chosen per engine from `docker info` and one probe:

- quota: the storage driver enforces a size on the container's writable layer
  (`storage_opt={"size": disk}`): overlay2 on xfs mounted with pquota, btrfs, zfs,
  devicemapper (the size must not be below its base size). The whole filesystem stays
  writable as usual; everything written anywhere shares the one quota; the memory limit
  is `memory` alone.
- tmpfs (every other engine, e.g. overlay2 on ext4, which has no quota): the root
  filesystem is read-only and the places agent code writes are size-limited tmpfs
  mounts: /workspace (half of disk), /tmp (a quarter: temporary files and the browser's
  profile) and /home/agent (a quarter: caches, `pip --user`). Their sizes add up to
  `disk`, so writing files ends with ENOSPC and never touches the engine's disk; any
  other path is read-only (EROFS). tmpfs pages are RAM charged to the container's memory
  cgroup, so the container's memory limit is `memory + disk`: files can never take the
  memory the processes were given, and the processes never the room of the files.

A sandbox of a task's own image with `SandboxSpec.writable_root` (Harbor's tasks: they install anywhere, as in
Harbor) on the tmpfs backend keeps a writable root filesystem: only /workspace, Harbor's places (/logs, /tests,
/solution) and the image's VOLUMEs are size-limited tmpfs (a quarter of `disk` between them), and the writable
layer, which holds everything else (its working directory, /tmp, /usr ...), is bounded at the rest: no one file
can grow past it (RLIMIT_FSIZE, the kernel's), and the layer as a whole is watched (diskwatch.py: many files
written at full speed can overshoot it by what is written before the watcher's next look).

Either way the engine's log of the container (sandboxd's stdout, which agent code can
write through /proc/1/fd/1) is json-file capped at LOG_MAX_SIZE x LOG_MAX_FILES.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from harness.errors import EngineNotFound, InfraError
from harness.sandbox.contract import WORKSPACE, SandboxSpec, parse_size
from harness.sandbox.docker import engine, naming

log = logging.getLogger(__name__)

AGENT_UID = 1000  # the image's `agent` user (images/sandbox/Dockerfile)
LOG_MAX_SIZE, LOG_MAX_FILES = "2m", "2"  # at most ~4 MB of log per sandbox
LOG_CONFIG = {"type": "json-file", "config": {"max-size": LOG_MAX_SIZE, "max-file": LOG_MAX_FILES}}
# Storage drivers that can limit a container's writable layer (overlay2 only on xfs with pquota).
QUOTA_DRIVERS = ("btrfs", "zfs", "devicemapper")
_lock = threading.Lock()
_probed: dict[tuple[str, int], bool] = {}


@dataclass(frozen=True)
class Backend:
    kind: str  # "quota" or "tmpfs"
    detail: str  # e.g. "overlay2 on extfs"


def _driver() -> tuple[str, str]:
    info = engine.info()
    status = {row[0]: row[1] for row in info.get("DriverStatus") or [] if len(row) == 2}
    return info.get("Driver", ""), status.get("Backing Filesystem", "")


def quota_candidate(driver: str, backing: str) -> bool:
    """Whether this storage driver may support a per-container size (a probe decides)."""
    return (driver in ("overlay2", "overlay") and backing == "xfs") or driver in QUOTA_DRIVERS


def _quota_works(image: str, size: int) -> bool:
    """Create (never start) a container with the size option and remove it: the engine refuses
    the option at create when its driver cannot enforce it (or, devicemapper, not that small)."""
    api = engine.client().api
    try:
        made = engine.call("create", lambda: api.create_container(
            image, entrypoint=["true"], labels=naming.labels("storage-probe", "probe", 1),
            host_config=api.create_host_config(storage_opt={"size": str(size)})), retries=0)
    except InfraError as exc:
        log.info("the engine refuses a storage quota (%s); sandboxes get size-limited tmpfs", exc)
        return False
    engine.remove_container(made["Id"])
    return True


def backend(image: str, disk: str) -> Backend:
    """The backend for a sandbox of this image and disk size on this engine (probed once)."""
    driver, backing = _driver()
    detail = f"{driver} on {backing}" if backing else driver
    if not quota_candidate(driver, backing):
        return Backend("tmpfs", detail)
    key = (image, parse_size(disk))
    with _lock:
        if key not in _probed:
            _probed[key] = _quota_works(image, key[1])
    return Backend("quota" if _probed[key] else "tmpfs", detail)


def tmpfs_sizes(disk: int) -> dict[str, int]:
    """How the tmpfs backend splits `disk` (bytes) between the writable places; the sum is disk."""
    workspace, tmp = disk // 2, disk // 4
    return {"/workspace": workspace, "/tmp": tmp, "/home/agent": disk - workspace - tmp}


def task_tmpfs_sizes(disk: int, places: tuple[str, ...]) -> dict[str, int]:
    """How a task's sandbox splits `disk`: its working directory (the first place; /workspace when it has none)
    half, /tmp a quarter, the rest (/workspace, Harbor's /logs, /tests, /solution) evenly; the sum is disk."""
    main, tmp = disk // 2, disk // 4
    rest = list(dict.fromkeys(place for place in ("/workspace", *places[1:]) if place not in (places[0], "/tmp")))
    each = (disk - main - tmp) // len(rest)
    sizes = {places[0]: main, "/tmp": tmp, **dict.fromkeys(rest, each)}
    sizes[rest[-1]] += disk - sum(sizes.values())
    return sizes


_images: dict[str, tuple[tuple[str, ...] | None, tuple[str, ...]]] = {}


def _image(image: str) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """(task_places, volumes) of an image, read once from its inspect; (None, ()) for an image this engine lacks
    (not remembered: the start that follows says what is missing, on a swarm node by node)."""
    if image not in _images:
        from harness.sandbox.docker.task_images import TASK_LABEL

        try:
            config = engine.call("image inspect", lambda: engine.client().api.inspect_image(image)).get("Config") or {}
        except EngineNotFound:
            return None, ()
        written = (config.get("Labels") or {}).get(TASK_LABEL)
        volumes = tuple(sorted(path.rstrip("/") or "/" for path in config.get("Volumes") or {}))
        _images[image] = (None if written is None else tuple(written.split()), volumes)
    return _images[image]


def task_places(image: str) -> tuple[str, ...] | None:
    """The places a task's own image says its sandboxes write (its working directory first, when it has one),
    or None for a harness image (its label: task_images.py)."""
    return _image(image)[0]


def volumes(image: str) -> tuple[str, ...]:
    """The image's declared VOLUMEs. The engine would give each an anonymous volume on its own disk, outside
    --disk and outside the quota: the harness mounts a size-limited tmpfs there instead (tmpfs_places, and
    create_options on a quota engine), which the engine takes for that path's mount and makes no volume."""
    return _image(image)[1]


def workdir(image: str) -> str:
    """The working directory of a sandbox of `image` (`Sandbox.workdir`): a task's own image's (its WORKDIR, or
    /workspace when it sets none: the first of its places), else /workspace."""
    places = task_places(image)
    return places[0] if places else WORKSPACE


def tmpfs_places(image: str, disk: int) -> dict[str, tuple[int, str]]:
    """The tmpfs backend's writable places of a sandbox of `image` (read-only root), its declared VOLUMEs among
    them: place -> (size in bytes, owner and mode options), the sizes adding up to `disk`. Also the swarm
    provider's (swarm/volumes.py)."""
    places, declared = _image(image)
    if places is None:
        owned = f"uid={AGENT_UID},gid={AGENT_UID},mode=0755"
        sizes = tmpfs_sizes(disk) if not declared else task_tmpfs_sizes(disk, ("/workspace", "/home/agent", *declared))
        return {place: (size, owned if place in ("/workspace", "/home/agent") else "mode=1777")
                for place, size in sizes.items()}
    # a task's own image (task_images.py): its user is its own, so each place is open to any
    return {place: (size, "mode=1777") for place, size in task_tmpfs_sizes(disk, (*places, *declared)).items()}


def volume_shares(image: str, disk: int) -> dict[str, int]:
    """On a quota engine: each declared VOLUME's size-limited tmpfs, half of `disk` between them (the quota of
    the writable layer is the rest)."""
    declared = volumes(image)
    return {path: disk // 2 // len(declared) for path in declared} if declared else {}


def writable_root(spec: SandboxSpec) -> bool:
    """Whether a sandbox of this spec keeps a writable root filesystem watched by diskwatch.py: a task's own image
    asked to (`SandboxSpec.writable_root`) on the tmpfs backend (on a quota engine every root is writable)."""
    return (spec.writable_root and task_places(spec.image) is not None
            and backend(spec.image, spec.disk).kind == "tmpfs")


def writable_root_places(image: str, disk: int) -> tuple[dict[str, int], int]:
    """A writable root's tmpfs places (/workspace, Harbor's and the image's VOLUMEs; not its working directory unless
    one of those, nor /tmp): place -> bytes, a quarter of `disk` between them; and the rest, the bound of the writable
    layer (diskwatch.py)."""
    places, declared = _image(image)
    kept = list(dict.fromkeys((WORKSPACE, *(places or ())[1:], *declared)))
    each = disk // 4 // len(kept)
    sizes = dict.fromkeys(kept, each)
    return sizes, disk - sum(sizes.values())


def create_options(spec: SandboxSpec) -> dict:
    """Container create options for the disk limit, the memory limit that goes with it, and the log cap."""
    disk, memory = parse_size(spec.disk), parse_size(spec.memory)
    options: dict = {"log_config": LOG_CONFIG}
    if backend(spec.image, spec.disk).kind == "quota":
        shares = volume_shares(spec.image, disk)
        held = sum(shares.values())  # tmpfs pages are memory: the volumes' room on top of `memory`
        options.update(storage_opt={"size": str(disk - held)}, mem_limit=memory + held, memswap_limit=memory + held)
        if shares:
            options["tmpfs"] = {path: f"rw,exec,nosuid,nodev,size={size},mode=1777" for path, size in shares.items()}
        return options
    if writable_root(spec):
        sizes, bound = writable_root_places(spec.image, disk)
        held = sum(sizes.values())
        options.update(tmpfs={place: f"rw,exec,nosuid,nodev,size={size},mode=1777" for place, size in sizes.items()},
                       mem_limit=memory + held, memswap_limit=memory + held,
                       # no file outgrows the layer's bound: the kernel stops its writer there (EFBIG, SIGXFSZ);
                       # the SDK makes its Ulimit of the dict (docker's own types not imported on the idle path)
                       ulimits=[{"name": "fsize", "soft": bound, "hard": bound}])
        return options
    options.update(
        read_only=True,
        tmpfs={place: f"rw,exec,nosuid,nodev,size={size},{mode}" for place, (size, mode) in
               tmpfs_places(spec.image, disk).items()},
        # tmpfs pages are charged to the memory cgroup: files get their own room on top of `memory`.
        mem_limit=memory + disk,
        memswap_limit=memory + disk,  # no swap: a memory hog is OOM-killed, not slowed to a crawl
    )
    return options
