"""Tool families: each kind of tool the agent gets (code, files, pictures, the browser, MCP...) is declared
in one module, as a `ToolFamily` subclass.

A family says, in its own module:
- `offered(setup)`: when it is offered, from the parts of the agent's request it reads (`Setup`: the model
  section, the limits, the run's search or MCP settings, the instance);
- `build(setup, envs)`: how its environment is built in the agent's process (and in the dry preflight,
  harness/agents/dry.py, over a sandbox that refuses every use); kept in `Environments`, read as `envs.of(F)`;
- `tools(envs, instance)`: its tools, plain async functions whose names, docstrings and signatures are what
  the model reads (harness/environments/tools.py turns them into schemas);
- `needs`: what its tools need in the sandbox image (tests/test_families.py checks images/sandbox carries it);
- `serve(setup, env, envs, work)`: what it does around the agent's turns (MCP connects its servers; the browser
  closes after them), and `context`: a context variable its environment is published under;
- its run-level steps, on the host, once per run (`RunSetup`: the provider, a sandbox spec of the run, the run's
  search and MCP settings): `check(run)` in the preflight, before anything is written (InputError when it cannot
  work for any instance, else a warning or None; MCP lists every server's tools, web search asks its provider
  once), and `start(run, stack)` before the first instance (a service the run's agents share, on `stack`: the
  site search crawls and indexes the offline site), returning the run setup with what the agents get of it.

What a benchmark judges of a run, and the hooks of its environment on the agent's meter, are the benchmark's
(harness/benchmark.py), not a family's. Defining a subclass with a `name` registers it. The built-in families are
the modules of harness/environments/families/, the package that is also the registry (it imports them with
itself); a benchmark's own are modules of its package (`Benchmark.families`, imported by the registry before
it is first asked); a plug-in agent's module may define its own (the agent's process imports the agent before
it builds the environments). `order` places a family's tools among the others' (model-visible: the order of the tools
never changes by accident), and `kit` says who gets them: "sandbox" tools every agent with tools gets
(`sandbox_tools`), "browser" ones the agents that browse (`web_tools`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.mcp_config import McpServer
from harness.environments.websearch.settings import SearchSettings
from harness.sandbox.contract import Sandbox, SandboxProvider, SandboxSpec
from harness.traces import Tracer

if TYPE_CHECKING:
    from harness.models.config import ModelSection
    from harness.models.meter import Meter

Tool = Callable[..., Awaitable[str]]
E = TypeVar("E")
T = TypeVar("T")
Kit = Literal["sandbox", "browser"]


@dataclass(frozen=True)
class Setup:
    """What the families read to build one instance's environments (AgentRequest.setup in the agent's
    process; harness/agents/dry.py before any sandbox)."""

    sandbox: Sandbox
    tracer: Tracer
    command_timeout: float
    page_size: int
    model: ModelSection | None = None  # None: the dry preflight of an agent without a model section
    instance: Instance | None = None
    search: SearchSettings | None = None  # the run's web search and leakage guard; None: --search none
    mcp: tuple[McpServer, ...] = ()
    replay_turns: list[dict[str, Any]] | None = None  # a replay model's recorded turns
    shots: Path | None = None  # where screenshots and shown pictures are kept (beside the trace); None: nowhere
    who: str = ""  # INSTANCE/ATTEMPT: the tag of this process's exchanges in a --web-record archive
    judge: ModelSection | None = None  # --judge-model: a family's judge, called from the host (a benchmark's)
    # The instance's judge's sandbox (`Benchmark.judge_sandbox`): beside `sandbox`, reached by the host alone
    judge_sandbox: Sandbox | None = None
    epoch: int = 1  # which of --epochs K this run of the instance is


@dataclass(frozen=True)
class RunSetup:
    """What the families' run-level steps read, on the host (runner/phases/preflight.py: `check`;
    runner/phases/services.py: `start`); what they give the agents is in `search` and `mcp`."""

    provider: SandboxProvider
    spec: SandboxSpec  # a sandbox of the run's image and resources, on the network its instances get
    instance: Instance | None  # the first instance to run (its files: a server shipped as a task file)
    run_dir: Path
    search: SearchSettings
    mcp: tuple[McpServer, ...] = ()
    website: Path | None = None  # the offline site folder (--website)
    web_record: bool = False
    web_replay: tuple[Path, ...] = ()  # the recorded run folders a --web-replay serves
    log: Callable[[str], None] = print


@dataclass(frozen=True)
class Needs:
    """What a family's tools need in the sandbox image: Debian packages and Python packages of /opt/toolbox."""

    apt: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()


class SchemaTool:
    """A tool that brings its own parameters' JSON schema (an MCP server's: environments/mcp_tools.py)
    instead of a signature: `schema` sends it as is, `arguments_model` checks calls against it
    (environments/tools.py)."""

    def __init__(self, name: str, description: str, parameters: dict[str, Any],
                 call: Callable[[dict[str, Any]], Awaitable[str]]):
        self.__name__, self.__doc__, self.parameters, self._call = name, description, parameters, call

    async def __call__(self, **arguments: Any) -> str:
        return await self._call(arguments)


class ToolFamily(Generic[E]):
    name: ClassVar[str]
    order: ClassVar[int]  # the place of its tools among its kit's
    kit: ClassVar[Kit] = "sandbox"
    needs: ClassVar[Needs] = Needs()
    context: ClassVar[ContextVar[Any] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            known = _REGISTERED.get(cls.name)
            if known is not None and type(known).__qualname__ != cls.__qualname__:
                raise TypeError(f"two tool families are named {cls.name!r}: {type(known).__qualname__} and "
                                f"{cls.__qualname__}")
            _REGISTERED[cls.name] = cls()

    def offered(self, setup: Setup) -> bool:
        return True

    def build(self, setup: Setup, envs: Environments) -> E | None:
        """This family's environment (None: nothing to offer after all); earlier families' are in `envs`."""
        return None

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        return []

    async def serve(self, setup: Setup, env: E, envs: Environments, work: Callable[[], Awaitable[T]]) -> T:
        return await work()

    def metered(self, env: E, meter: Meter) -> None:
        """Hands the environment the agent's meter, for a family whose tools make paid calls (a transcription, a
        paid search): each is then checked against the budgets before it is made and counted (Meter.paying)."""

    def check(self, run: RunSetup) -> str | None:
        """The preflight, before anything is written: InputError when this family cannot work for any
        instance; a warning to say, or None."""
        return None

    def start(self, run: RunSetup, stack: contextlib.ExitStack) -> RunSetup:
        """Before the run's first instance: what its agents share (entered on `stack`, left after the last);
        the run setup with what they get of it (`dataclasses.replace`)."""
        return run


_REGISTERED: dict[str, ToolFamily] = {}  # by name; the registry: harness/environments/families/
