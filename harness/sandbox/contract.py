"""The sandbox contracts: what the rest of the harness may ask of a sandbox and of a provider.

Two interfaces, and nothing else crosses the boundary:

- `Sandbox`: one open sandbox. Run commands (`exec`), move files (`copy_in`, `read_file`),
  reach its service (`connection()`, for the browser), and describe itself as a
  serialisable `SandboxHandle` that another process can `attach` to.
- `SandboxProvider`: the lifecycle. `preflight` (engine, image, network policy; before any
  instance), `start`, `attach`, `teardown` (idempotent), `cleanup` of orphans and `find`
  of a run's leftovers, the engine's `capacity` (checked against a run's limits), and what
  it offers beyond that, declared in its class's `capabilities` (`Capabilities`) and checked
  before a run writes anything (runner/preflight.py) or `harness images` calls it: run-scoped
  services (`website`, `web_proxy`) and image operations (`build_image`, `list_images`,
  `prune_images`). What a provider does not offer keeps the contract's default, which declines.

Errors a caller may see, all from `harness.errors`: `SandboxDied` (infra: the sandbox is
gone; the instance cannot go on; its subclass `SandboxExhausted` when the agent's code used
up the sandbox's memory and the kernel killed it: kind agent, not retried), the typed
`SandboxRequestError`s (the sandbox is fine, it refused one request: not found, permission,
is-a-directory, output limit, unsupported), and `InfraError` for engine trouble. Every
provider must pass tests/conformance.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field, field_validator

from harness.errors import InputError, SandboxUnsupported

WORKSPACE = "/workspace"
# An image name of the form ENGINE_IMAGE + IMAGE (a Harbor verifier's docker_image): the image IMAGE the engine has,
# made a sandbox as a task's own image is; no registry is asked for it
ENGINE_IMAGE = "engine-image:"
DEFAULT_MAX_OUTPUT = 1024 * 1024  # bytes kept per stream; the rest is counted, not kept
DEFAULT_MAX_READ = 64 * 1024 * 1024  # read_file refuses larger files (SandboxOutputLimit)
# Writable space per sandbox by default. Where the engine has no storage quota it is RAM
# (tmpfs), so a modest default: 2 GiB.
DEFAULT_DISK = "2g"
MIN_DISK = 64 * 1024 * 1024  # the browser's profile and the toolbox's caches need some room


class SandboxSpec(BaseModel):
    """Everything needed to start one sandbox (typed, validated before any container)."""

    image: str
    run_id: str
    instance_id: str
    attempt: int = 1
    # Resource limits: safe defaults, overridable per run.
    memory: str = "2g"
    cpus: float = 1.0
    pids: int = 1024  # Chromium alone runs ~200 threads
    # Writable space (files the agent's code writes anywhere, /workspace, /tmp, $HOME...):
    # writing beyond it fails with ENOSPC, never fills the engine's disk. How a provider
    # enforces it (a storage quota, or size-limited tmpfs) is its own; see docs/sandboxes.md "Disk".
    disk: str = DEFAULT_DISK
    # "none" (default), "internet", or "internal:NAME" (only that internal network).
    network: str = "none"
    env: dict[str, str] = Field(default_factory=dict)
    # Who its service and every command run as (a name or uid the image knows); None: the image's USER.
    user: str | None = None
    # Where its commands start (`Sandbox.workdir`) instead of the image's working directory (a Harbor task's
    # [environment] workdir); None: the image's.
    workdir: str | None = None
    # A writable root filesystem where the image is a task's own (Harbor's tasks install anywhere), --disk still
    # bounding what is written; False: the provider's default (docs/sandboxes.md "Disk"). The benchmark declares it
    # (`Benchmark.writable_root`).
    writable_root: bool = False

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        if parse_size(value) < 6 * 1024 * 1024:
            raise ValueError(f"memory must be a size like 512m or 2g (at least 6m), not {value!r}")
        return value

    @field_validator("disk")
    @classmethod
    def _disk(cls, value: str) -> str:
        if parse_size(value) < MIN_DISK:
            raise ValueError(f"disk must be a size like 512m or 2g (at least 64m), not {value!r}")
        return value

    @field_validator("cpus")
    @classmethod
    def _cpus(cls, value: float) -> float:
        if value <= 0:
            raise ValueError(f"cpus must be > 0, not {value}")
        return value

    @field_validator("pids")
    @classmethod
    def _pids(cls, value: int) -> int:
        if value < 16:
            raise ValueError(f"pids must be >= 16, not {value}")
        return value

    @field_validator("network")
    @classmethod
    def _network(cls, value: str) -> str:
        if value in ("none", "internet") or re.fullmatch(r"internal:[A-Za-z0-9][A-Za-z0-9_.-]*", value):
            return value
        raise ValueError(f"network must be none, internet or internal:NAME, not {value!r}")


def parse_size(value: str) -> int:
    """'512m', '2g', '1024k', '100' (bytes) -> bytes; -1 for anything else."""
    match = re.fullmatch(r"\s*(\d+)\s*([bkmg]?)b?\s*", str(value).lower())
    if not match:
        return -1
    return int(match.group(1)) * {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2)]


def canonical_size(value: str) -> str:
    """A size as one spelling: its largest whole unit ('2gb', '2G', '2048m' -> '2g'; '1536m' stays), so two
    spellings of one size compare equal (a resume's run.json); what parse_size cannot read is kept as it is."""
    size = parse_size(value)
    if size < 0:
        return value
    for unit, scale in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if size and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


class SandboxHandle(BaseModel):
    """A serialisable reference to an open sandbox: enough for another process to attach.

    `ref` holds provider-specific fields (a container id, a service id); only the provider
    that made the handle reads it."""

    provider: str
    name: str
    host: str
    port: int
    token: str
    socket: str | None = None  # sandboxd's Unix socket on this machine, when it listens on one (host and port name it)
    workdir: str = WORKSPACE  # the sandbox's working directory (`Sandbox.workdir`)
    spec: SandboxSpec
    ref: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Connection:
    """How to reach the sandbox's service directly (e.g. Playwright over CDP): a base URL and
    the headers every request must carry."""

    host: str
    port: int
    headers: Mapping[str, str]

    def url(self, path: str, scheme: str = "http") -> str:
        return f"{scheme}://{self.host}:{self.port}{path}"


@dataclass(frozen=True)
class ExecResult:
    """How a command ended. `exit_code` follows the shell: 126 cannot execute, 127 not found
    (or no such working directory), 128+N killed by signal N (`signal` is N), 137 with
    `timed_out` when the harness killed it at its timeout."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration: float = 0.0
    signal: int | None = None
    # False when nothing ran: no such program or cwd, not executable, or no process could be
    # made (the sandbox's pids limit full); the exit code (126/127) and stderr say which.
    started: bool = True

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Sandbox(abc.ABC):
    """An open sandbox. Raises SandboxDied (an InfraError) when it is gone.

    `workdir` is its working directory, decided by its provider when it starts (and carried by its handle):
    where a command starts unless given a `cwd`, so where the agent's code tools work. /workspace, or the
    working directory of a task's own image (a Harbor task's WORKDIR, e.g. /app)."""

    name: str
    workdir: str = WORKSPACE

    @abc.abstractmethod
    def exec(self, argv: Sequence[str], *, timeout: float | None = 60, stdin: str | bytes | None = None,
             cwd: str | None = None, env: Mapping[str, str] | None = None,
             max_output: int = DEFAULT_MAX_OUTPUT, user: str | None = None) -> ExecResult:
        """Run argv in `cwd` (None: the sandbox's `workdir`). On timeout the whole process tree is killed and
        timed_out is set; timeout=None waits for the command however long it takes. `user` other than the
        sandbox's own raises SandboxUnsupported where the provider cannot switch users."""

    def shell(self, command: str, **kwargs: Any) -> ExecResult:
        return self.exec(["bash", "-c", command], **kwargs)

    def python(self, code: str, **kwargs: Any) -> ExecResult:
        """Run Python code (the sandbox's toolbox interpreter), passed on stdin."""
        return self.exec(["python3", "-"], stdin=code, **kwargs)

    @abc.abstractmethod
    def copy_in(self, root: Path, names: Sequence[str], dest: str = WORKSPACE) -> list[str]:
        """Copy root/NAME for each name into dest/NAME. A local problem with the files is an
        InputError raised before anything is sent; refusals inside are SandboxRequestErrors."""

    @abc.abstractmethod
    def read_file(self, path: str, *, max_bytes: int = DEFAULT_MAX_READ) -> bytes:
        """The bytes of a file inside the sandbox. SandboxFileNotFound / SandboxPermissionDenied /
        SandboxIsADirectory, or SandboxOutputLimit when the file is larger than max_bytes."""

    @abc.abstractmethod
    def connection(self) -> Connection:
        """Where the sandbox's service answers, and the headers it wants."""

    @property
    def endpoint(self) -> tuple[str, int]:
        conn = self.connection()
        return conn.host, conn.port

    @abc.abstractmethod
    def handle(self) -> SandboxHandle:
        """A serialisable handle: `provider.attach(handle)` in another process reaches this sandbox."""

    @abc.abstractmethod
    def start_browser(self, force: bool = False) -> str:
        """Start (or find, or restart) the sandbox's browser; return its DevTools WebSocket path,
        reachable through `connection()`. force: kill a running but stuck browser first."""

    def end_processes(self) -> int:
        """End every process in the sandbox but the provider's own service (agent code's daemons included) and
        return how many are still alive (0: nothing agent code started can run or write any more), before a
        verdict is taken in the sandbox. The default: SandboxUnsupported (the provider cannot)."""
        raise SandboxUnsupported(f"the sandbox {self.name} cannot end its processes")

    def close(self) -> None:  # noqa: B027 - a default, not abstract: a provider without connections keeps it
        """Drop this process's connections (the sandbox itself keeps running)."""


@dataclass(frozen=True)
class Capacity:
    """The most one sandbox could be given on an engine: CPUs and memory in bytes."""

    cpus: float
    memory: int


@dataclass(frozen=True)
class Leftover:
    """A resource a provider found (and maybe removed) while cleaning up."""

    id: str
    name: str
    run_id: str
    owner: str
    state: str


@dataclass(frozen=True)
class ImageInfo:
    """A sandbox image a provider holds; `current`: the one its runs use now."""

    tag: str
    id: str
    size_mb: float
    created: str
    current: bool = False


@dataclass(frozen=True)
class Capabilities:
    """What a provider offers beyond the lifecycle (each a method of `SandboxProvider` it implements)."""

    website: bool = False  # `website`: serve --website's offline site to a run's sandboxes
    web_proxy: bool = False  # `web_proxy`: the run's recording or replaying proxy (--web-record/--web-replay)
    images: bool = False  # `build_image`, `list_images`, `prune_images`: `harness images ...`


class SandboxProvider(abc.ABC):
    """The lifecycle of sandboxes on one kind of engine."""

    name: str
    capabilities: ClassVar[Capabilities] = Capabilities()
    # Modules every agent process needs to `attach` and use this provider's sandboxes, beyond the
    # provider's own module: the agents' fork server imports both once per run (sandbox/registry.py
    # `preload`, harness/runner/agent_process/forkserver.py).
    preload: tuple[str, ...] = ()

    @abc.abstractmethod
    def preflight(self, *, network: str = "none", log: Callable[[str], None] = print) -> str:
        """Check everything a run needs before any instance starts (engine answers, image present
        or built, network policy possible); return the image reference. InputError for a bad
        setting, InfraError/EngineUnavailable when the engine is the problem."""

    def image_of(self, name: str, *, log: Callable[[str], None] = print, build_timeout: float | None = None) -> str:
        """Make present the image a benchmark or task names (`Instance.image`: a build context images/NAME of
        the harness, built on the sandbox image, the path of a task's own build context, or ENGINE_IMAGE + an image
        the engine has) and return its
        reference; called by the preflight for every name the run's instances use, before anything is written.
        A task's own build ends within `build_timeout` seconds (`Instance.build_timeout`; None: the provider's
        default), waiting for another build no longer. The default refuses (InputError)."""
        from harness.errors import InputError

        raise InputError(f"the {self.name} sandbox provider cannot run instances of the image {name!r} "
                         "(the docker provider can)")

    def check_image(self, name: str) -> None:
        """Refuse (InputError), before the preflight builds any image, an image `image_of` could not make (a task
        whose base image is missing); called for every name first. The default: nothing (`image_of` refuses)."""
        return None

    def image_ref(self) -> str | None:
        """The image reference `preflight` would return, told without the engine, or None when only the
        engine can tell (the default). A resume with nothing to do records it in run.json instead of
        calling `preflight` (runner/phases/idle.py)."""
        return None

    def prepare(self, *, network: str = "none", log: Callable[[str], None] = print) -> None:
        """Make ready, once, what the run's sandboxes on `network` need beyond what preflight checked
        (the Docker provider's isolated network and its firewall rules). A run calls it only when it
        has instances to run: a resume with nothing to do pays for none of it. The default does nothing."""
        return None

    @abc.abstractmethod
    def start(self, spec: SandboxSpec) -> Sandbox:
        """Start a sandbox and wait until its service answers; nothing is left behind on failure."""

    @abc.abstractmethod
    def attach(self, handle: SandboxHandle) -> Sandbox:
        """The sandbox a handle names (made by this provider, maybe in another process)."""

    @abc.abstractmethod
    def teardown(self, sandbox: Sandbox) -> None:
        """Remove the sandbox and everything it holds; idempotent."""

    @abc.abstractmethod
    def find(self, run_id: str | None = None) -> list[Leftover]:
        """Harness resources on the engine (all, or one run's), without removing anything."""

    @abc.abstractmethod
    def cleanup(self, *, run_id: str | None = None, everything: bool = False,
                dry_run: bool = False) -> list[Leftover]:
        """Remove orphans (owner process gone; the default), one run's resources, or all harness ones."""

    def capacity(self) -> Capacity | None:
        """The engine's CPUs and memory, against which a run checks --cpus and --memory before any
        instance starts; None when the provider cannot tell (nothing is checked)."""
        return None

    @property
    def label(self) -> str:
        """The provider as a user names it: its name, or `module:Class` for a plug-in without one."""
        return getattr(self, "name", None) or f"{type(self).__module__}:{type(self).__qualname__}"

    def website(self, site_dir: Path, image: str, run_id: str) -> AbstractContextManager[str]:
        """Serve an offline site to this run's sandboxes; yields the network policy to give them
        (`capabilities.website`)."""
        raise NotImplementedError(f"the {self.label} provider cannot serve --website")

    def web_proxy(self, mode: str, run_id: str, network: str | None, **options: Any) -> AbstractContextManager[Any]:
        """The run's web proxy, `mode` "record" (into `out`) or "replay" (of `archives`), on the site's
        `network` or (None) one of its own; yields it (its `network`) once it listens (`capabilities.web_proxy`)."""
        raise NotImplementedError(f"the {self.label} provider has no web proxy")

    def build_image(self, *, force: bool = False, log: Callable[[str], None] = print) -> str:
        """Make the sandbox image present on the engine (`force`: rebuild it); return its reference."""
        raise self.no_images("build_image")

    def list_images(self) -> list[ImageInfo]:
        """The harness's sandbox images on the engine."""
        raise self.no_images("list_images")

    def prune_images(self, log: Callable[[str], None] = print) -> list[str]:
        """Remove sandbox images other than the current one; return the removed references."""
        raise self.no_images("prune_images")

    def no_images(self, operation: str) -> InputError:
        """Why a provider without `capabilities.images` declines an image operation."""
        return InputError(f"the sandbox provider {self.label} has no images of its own (it does not implement "
                          f"{operation})")

    @contextmanager
    def open(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        """Start a sandbox and tear it down on every way out of the block."""
        sandbox = self.start(spec)
        try:
            yield sandbox
        finally:
            self.teardown(sandbox)
