"""One error taxonomy for the whole pipeline.

Each error is raised where it happens and carries its kind, so retries and
reports decide by type, never by parsing messages. The kinds are a closed set
(`ErrorKind`), and a result row's `error_kind` is one of them:

- input:   the user's dataset, flags or config are wrong (CLI exit 2, before any container)
- infra:   the engine, an image or a sandbox failed; retried on a fresh sandbox
- agent:   the agent under test crashed or misbehaved (its own code broke); recorded, not retried
- model:   the model provider failed after the client's own retries; recorded
- scorer:  a scorer could not reach a verdict
- harness: a bug in the harness itself; recorded with its traceback in the trace, not retried in the run

`retryable` is what the runner reads to decide on another attempt in a fresh sandbox.
An exception that is not a HarnessError is classified by `kind_of` where it is caught.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal, get_args

if TYPE_CHECKING:  # only for the annotation: this module imports nothing at run time
    from pydantic import ValidationError

ErrorKind = Literal["input", "infra", "agent", "model", "scorer", "harness"]
ERROR_KINDS: tuple[str, ...] = get_args(ErrorKind)
# The packages whose exceptions are a model client's (the providers' SDKs and their HTTP packages).
MODEL_CLIENT_MODULES = ("openai", "anthropic", "httpx")


class HarnessError(Exception):
    kind: ClassVar[ErrorKind] = "harness"
    retryable: ClassVar[bool] = False
    # The run's own configuration, whichever instance met it (a priced model's reply without usage): the run starts
    # no more instances and exits 2 (runner/evaluate.py). Other errors, input ones included, end their instance only.
    stops_run: ClassVar[bool] = False


class InputError(HarnessError):
    kind = "input"


class OwnFileRefused(HarnessError):
    """The run directory refused a file the harness writes for itself (an agent's request, trace or
    result, a trace's verdict): its disk is full or read-only. The instance's failure is the harness's,
    never the agent's, and the run starts no more instances (exit 4: harness/runner/evaluate.py)."""


class InfraError(HarnessError):
    kind: ClassVar[ErrorKind] = "infra"  # declared: a subclass may be another kind's (SandboxExhausted)
    retryable = True


class SandboxDied(InfraError):
    """The sandbox is gone or its service stopped answering.

    `oom_killed`: the engine saw the kernel kill the sandbox for memory (its processes used
    all of it): the agent's code exhausted the sandbox, see SandboxExhausted."""

    oom_killed: bool = False


class SandboxExhausted(SandboxDied):
    """The sandbox died because the agent's code used up its memory (the container was
    OOM-killed). The agent's error, not infra's: a fresh sandbox would meet the same end."""

    kind = "agent"
    retryable = False
    oom_killed = True


class SandboxDiskLimit(SandboxExhausted):
    """The sandbox was ended because the agent's code wrote more than --disk into its writable root filesystem
    (a writable root on an engine without a storage quota: harness/sandbox/docker/diskwatch.py). A limit, as the
    wall-clock one: `limit` names it in the row."""

    oom_killed = False
    limit = "disk"


class SocketRefused(InfraError):
    """A sandbox's Unix socket path is not a socket of this user (a FIFO, a link, a file, another user's
    socket): refused before anything connects or follows it."""


class EngineUnavailable(InfraError):
    """No sandbox engine answers."""


# ---------------------------------------------------------------- engine refusals
# The engine answered one call with a refusal of a cause the harness decides on. Raised only by a
# provider's engine module (sandbox/docker/engine.py reads the engine's status and words, once);
# every other module decides by these types, never by an exception's text. They live here, not
# beside the engine, because the causes are any container engine's, and the type is what a row
# records. Still infra: unhandled, the instance is retried on a fresh sandbox.
class EngineRefused(InfraError):
    """A refusal of a known cause (one of the subclasses)."""


class EngineNotFound(EngineRefused):
    """The object named (container, network, image, volume, service, task, node) does not exist."""


class EngineConflict(EngineRefused):
    """The call collides with the object's state: its name is taken, it exists already, or its
    removal is already in progress."""


class EngineKillTimedOut(EngineRefused):
    """The engine killed the container but gave up waiting for it to exit (hundreds of busy processes
    under a CPU limit take long to die); asking again goes on waiting."""


class EngineInUse(EngineRefused):
    """The object cannot be removed while something uses it (a network with active endpoints)."""


class UnknownUser(EngineRefused):
    """The container's user (`SandboxSpec.user`) is not in its image: the task's doing (the provider says so)."""


class PortTaken(EngineRefused):
    """The host port asked for is held by something else (the container did not start)."""


class MountSourceUnseen(EngineRefused):
    """A bind mount's source directory does not exist where the engine looks (an engine in a VM or
    a confined package with a /tmp of its own): the socket transport cannot be used there."""


class AgentError(HarnessError):
    """The agent under test failed (its code raised, its process died, it broke its own sandbox)."""

    kind = "agent"


class ModelError(HarnessError):
    kind = "model"


class ScorerError(HarnessError):
    kind = "scorer"


class LimitExceeded(AgentError):
    """The agent reached a budget (max_steps, max_tokens): the row is a `limit`, still scored."""

    def __init__(self, limit: str, detail: str):
        super().__init__(f"{limit}: {detail}")
        self.limit = limit


# ---------------------------------------------------------------- sandbox requests
class SandboxRequestError(HarnessError):
    """The sandbox answered but refused one request. Typed by cause; the sandbox is fine.

    The kind is `agent`: these follow from what the caller asked for (an agent's path, an
    oversized read). A caller that is the harness itself re-raises them as its own kind."""

    kind = "agent"


class SandboxFileNotFound(SandboxRequestError, FileNotFoundError):
    pass


class SandboxPermissionDenied(SandboxRequestError, PermissionError):
    pass


class SandboxIsADirectory(SandboxRequestError, IsADirectoryError):
    pass


class SandboxOutputLimit(SandboxRequestError):
    """A read or an upload is larger than the limit the caller or the service allows."""


class SandboxUnsupported(SandboxRequestError):
    """The provider cannot do this (e.g. run a command as another user)."""


class SandboxBadRequest(SandboxRequestError):
    """Anything else the service refused (a malformed request, a path outside the workspace)."""


def kind_of(exc: BaseException) -> ErrorKind:
    """The kind of any exception: a HarnessError says so; model-client errors are `model`;
    anything else raised inside the agent's process is the agent's."""
    if isinstance(exc, HarnessError):
        return exc.kind
    module = type(exc).__module__ or ""
    if module.startswith(MODEL_CLIENT_MODULES):
        return "model"
    return "agent"


def validation_problems(exc: ValidationError, field_prefix: str = "") -> str:
    """A pydantic ValidationError as one line naming each field (after `field_prefix`, e.g. "--" for
    flags) and its problem: `temperature: Input should be a valid number (got 'hot'); max_connections:
    ...`. Where an InputError carries one, this is its text (pydantic's own is several lines with links)."""
    parts: list[str] = []
    for error in exc.errors():
        where = field_prefix + (".".join(str(x) for x in error.get("loc", ())) or "value")
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        given = error.get("input")
        if error.get("type") != "missing" and not isinstance(given, (dict, list)) and repr(given) not in message:
            shown = repr(given)
            message += f" (got {shown if len(shown) <= 60 else shown[:59] + '…'})"
        parts.append(f"{where}: {message}")
    return "; ".join(parts) or str(exc).splitlines()[0]
