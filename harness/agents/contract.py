"""The agent-runner contract, free of any framework.

The harness runs each instance's agent in a process of its own (runner/agent_process/child.py). That
process receives an `AgentRequest`, asks the agent registry for an `AgentRunner`, drives
it turn by turn (the simulated user answers a turn that ends without <solution>), and
answers with an `AgentResult`. A runner adapts one framework (AutoGen in
harness/agents/autogen/, none in harness/agents/plain/); it writes the harness's own
trace events (harness/traces) and sees the instance only through `AgentContext`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, model_validator

from harness.datasets.model import Instance
from harness.environments.family import Setup
from harness.environments.mcp_config import McpServer
from harness.environments.websearch.settings import SearchSettings
from harness.errors import ErrorKind, kind_of
from harness.models.budget import BudgetSpec
from harness.models.config import ModelSection
from harness.sandbox.contract import Sandbox, SandboxHandle
from harness.traces import ToolsOffered, Tracer
from harness.usage import Usage

if TYPE_CHECKING:  # the harness's own process never builds an AgentContext: not imported there
    from harness.environments import Environments
    from harness.models.meter import Meter

DEFAULT_USER_REPLY = (
    "I cannot help: there is no human to answer questions. Carry on with the tools you have, and give "
    "your final answer inside <solution></solution>."
)


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True)

    # The run's limits section (harness/config.py): each field is the flag of its name (--max-steps).
    max_steps: int | None = Field(None, ge=1)  # model calls
    max_tokens: int | None = Field(None, ge=1)  # prompt + completion, all clients of the instance
    max_instance_cost: FiniteFloat | None = Field(None, gt=0)  # dollars, all clients of the instance (harness/usage.py)
    instance_timeout: float | None = Field(None, gt=0)  # wall seconds, enforced by killing the agent's process
    command_timeout: float = Field(120.0, gt=0)  # one code-environment command
    page_size: int = Field(8000, ge=100)  # characters per page of a file or web page shown to the agent

    def tightened(self, max_steps: int | None = None, max_tokens: int | None = None) -> Limits:
        """These limits with a task's own max_steps/max_tokens where they are stricter."""
        tighter = {name: mine for name, mine in (("max_steps", max_steps), ("max_tokens", max_tokens))
                   if mine is not None and (getattr(self, name) is None or mine < getattr(self, name))}
        return self.model_copy(update=tighter) if tighter else self


class UserSimulation(BaseModel):
    """The simulated user: answers a turn that ended without an answer in <solution> tags."""

    model_config = ConfigDict(frozen=True)

    reply: str = DEFAULT_USER_REPLY
    max_replies: int = Field(3, ge=0)  # 0: never reply
    function: str | None = None  # module:function(final_message, instance, number) -> str | None


class AgentRequest(BaseModel):
    """Parent -> agent process."""

    instance: Instance
    task: str
    # An instance of several steps: the instruction of each step after the first (runner/prompt.py), each given
    # to a fresh run of the agent when the instance's tool family starts that step (runner/agent_process/child.py)
    later_steps: list[str] = Field(default_factory=list)
    agent: str
    model: ModelSection
    limits: Limits
    user: UserSimulation = Field(default_factory=UserSimulation)
    sandbox: SandboxHandle
    trace_path: str
    replay_turns: list[dict[str, Any]] | None = None  # this instance's recorded turns (replay models)
    # The run's directory of model-call slots (models/slots.py): the model's calls in flight, across
    # all agent processes, stay within its max_connections. None: no cap.
    slots_dir: str | None = None
    budget: BudgetSpec | None = None  # --max-cost: the run's spend, shared by its agents (models/budget.py)
    epoch: int = 1  # which of --epochs K this run of the instance is
    cache_dir: str | None = None  # --cache DIR: the model calls' response cache (models/cache.py); None: off
    search: SearchSettings | None = None  # the run's web search (environments/websearch/); None: no tool
    mcp: tuple[McpServer, ...] = ()  # the run's MCP servers (environments/mcp_config.py), connected in the process
    judge: ModelSection | None = None  # --judge-model: the judge a tool family asks from the host (Gaia2's soft checks)
    judge_sandbox: SandboxHandle | None = None  # the instance's judge's sandbox (ToolFamily.apart), the host's alone

    def section(self) -> ModelSection:
        """The model section as the agent's process uses it: no model call may eat the instance's budget."""
        return self.model.within(self.limits.instance_timeout)

    def setup(self, sandbox: Sandbox, tracer: Tracer, shots: Path | None,
              judge_sandbox: Sandbox | None = None) -> Setup:
        """What the tool families read of this request to build its environments (environments/family.py);
        `judge_sandbox`: the one `judge_sandbox` names, attached."""
        return Setup(sandbox, tracer, command_timeout=self.limits.command_timeout, page_size=self.limits.page_size,
                     model=self.section(), instance=self.instance,
                     search=self.search, mcp=self.mcp, replay_turns=self.replay_turns, shots=shots, judge=self.judge,
                     who=f"{self.sandbox.spec.instance_id}/{self.sandbox.spec.attempt}", judge_sandbox=judge_sandbox,
                     epoch=self.epoch)

    @model_validator(mode="after")
    def _slots_to_model(self) -> AgentRequest:
        """The model's clients see only its section: give it the slot directory."""
        if self.slots_dir:
            self.model = self.model.with_slots(self.slots_dir)
        return self


class AgentResult(BaseModel):
    """Agent process -> parent."""

    final_message: str = ""
    tool_calls: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    limit: str | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    retryable: bool = False
    stops_run: bool = False  # the error is the run's configuration (HarnessError.stops_run): no more instances
    user_replies: int = 0
    verdicts: dict[str, dict[str, Any]] = Field(default_factory=dict)  # a tool family's own judgement, by family


@dataclass
class AgentContext:
    """What a runner gets for one instance."""

    task: str
    instance: Instance
    limits: Limits
    model: ModelSection
    meter: Meter
    tracer: Tracer
    envs: Environments
    replay_turns: list[dict[str, Any]] | None = None
    trace_dir: Path | None = None


class AgentRunner(abc.ABC):
    """One agent on one instance. `turn` is called with the task, then with each simulated user
    reply; it runs the agent until it ends its turn and returns the agent's last text."""

    # Modules the fork server imports once per run for this runner's processes
    # (harness/runner/agent_process/forkserver.py).
    preload: tuple[str, ...] = ()

    def __init__(self, target: Any = None):
        self.target = target  # what the registry resolved (e.g. an AutoGen agent factory), if any

    @classmethod
    def preflight(cls, target: Any, model: ModelSection, instance: Instance, limits: Limits,
                  search: SearchSettings | None = None) -> Callable[[], Any] | None:
        """Checked once in the harness's process, before any container: build what `setup` builds
        where that needs no sandbox (harness/agents/dry.py, with the run's `search` so that the first
        request carries web_search's schema), raising on what cannot work, and return this runner's
        first model call, to be made once for real by the model preflight (models/probe.py; not for
        replay models), which may return what its reply said (`probe.Answered`: a tool call written as
        text is warned of). `model` is the section as the preflight calls it. None (the default): a
        plain chat completion stands for the runner's calls."""
        return None

    @abc.abstractmethod
    async def setup(self, ctx: AgentContext) -> None:
        """Build the agent (model clients, tools) for this instance."""

    @abc.abstractmethod
    async def turn(self, message: str) -> str:
        """Give the agent a user message (the task first) and run it until it ends its turn."""

    def tools_offered(self) -> ToolsOffered | None:
        """After `setup`: the tools its model(s) are offered, as the model is sent them (the agent's process traces
        it once per attempt). None (the default): the runner offers none, or cannot say."""
        return None

    async def close(self) -> None:  # noqa: B027 - a default, not abstract: a runner that made nothing keeps it
        """Release what setup made."""

    def classify(self, exc: BaseException) -> ErrorKind:
        """The error kind of an exception the agent raised (frameworks add their model errors)."""
        return kind_of(exc)
