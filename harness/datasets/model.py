"""The instance contract: what a dataset hands to the rest of the pipeline, and a loaded dataset."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from harness.benchmark import CUSTOM

# An instance's metadata key: the questions of its steps after the first (`question`), in order, each asked of a
# fresh run of the agent when its tool family starts that step (runner/prompt.py, runner/agent_process/child.py).
STEPS = "later_steps"


class JudgeSandbox(BaseModel):
    """A judge's sandbox an instance asks for itself (a Harbor task's separate verifier), started beside its sandbox
    and reached by the host alone: its own resources (None: the instance's), its user (None: the image's USER) and
    its network ("none", or None: the run's --network, as the instance's own). Its image is the instance's unless it
    names one of its own (`image`, as `Instance.image` names one, made present by the provider's `image_of` within
    `build_timeout`)."""

    cpus: float | None = Field(None, gt=0)
    memory: str | None = None
    network: Literal["none"] | None = "none"
    user: str | None = None
    image: str | None = None
    build_timeout: float | None = Field(None, gt=0)


class Instance(BaseModel):
    instance_id: str
    question: str
    answer: str | None = None  # the target; None when the dataset has no answers
    files: list[str] = Field(default_factory=list)  # names relative to `root`, copied to /workspace
    root: Path  # the folder the file names are relative to
    level: int | None = None
    metadata: dict = Field(default_factory=dict)
    # Per-task expectations (the seed's task schema): enforced for this instance beside the run's
    # --max-steps/--max-tokens (the stricter wins); read by the tool_calls and budget scorers.
    expected_tool_calls: list[str] | None = None
    max_steps: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    # The image its sandbox runs from, made present by the provider's `image_of`: a build context images/NAME of
    # the harness (e.g. "gaia2"), built on the sandbox image, or the absolute path of the task's own build context
    # (a Harbor task's environment/: harness/sandbox/docker/task_images.py); None: the sandbox image.
    image: str | None = None
    # The task's own wall seconds and resources (a Harbor task.toml's), instead of the run's --instance-timeout,
    # --cpus and --memory.
    timeout: float | None = Field(None, gt=0)
    build_timeout: float | None = Field(None, gt=0)  # the most seconds its own image (`image`, a context) may build
    cpus: float | None = Field(None, gt=0)
    memory: str | None = None
    # "none": this task's sandbox has no network whatever the run's --network (a task may narrow the policy, never
    # widen it: a Harbor task's network_mode "no-network"); None: the run's.
    network: Literal["none"] | None = None
    user: str | None = None  # who its sandbox's commands run as (a Harbor task's [agent] user); None: the image's
    # Where its sandbox's commands start instead of its image's working directory (a Harbor task's [environment]
    # workdir); None: the image's.
    workdir: str | None = None
    judge_sandbox: JudgeSandbox | None = None  # a judge's sandbox of its own (see JudgeSandbox)
    # Variables set in its sandbox, seen by every command run there (a Harbor task's [environment] env).
    env: dict[str, str] = Field(default_factory=dict)
    # The benchmark it is an instance of (harness/benchmark.py: its prompt conventions, scorers, oracle...), set by
    # its dataset adapter; "custom": a dataset of one's own.
    benchmark: str = CUSTOM

    def limited(self, limits):
        """The run's Limits with this task's own max_steps/max_tokens where they are stricter, its own timeout."""
        limits = limits.tightened(self.max_steps, self.max_tokens)
        return limits if self.timeout is None else limits.model_copy(update={"instance_timeout": self.timeout})

    def resources(self, resources: Mapping[str, Any]) -> dict[str, Any]:
        """The run's SandboxSpec resources with this task's own cpus, memory, (narrower) network, user and working
        directory where it names them."""
        own = {name: value for name in ("cpus", "memory", "network", "user", "workdir")
               if (value := getattr(self, name)) is not None}
        if self.env:
            own["env"] = {**resources.get("env", {}), **self.env}
        return {**resources, **own}

    def judge_resources(self, resources: Mapping[str, Any]) -> dict[str, Any]:
        """The SandboxSpec resources of its judge's sandbox: its own `judge_sandbox`'s where it names them, else
        its own sandbox's, with no network unless it asks for the run's; a benchmark's (`judge_sandbox`) has none."""
        own = self.resources(resources)
        judge = self.judge_sandbox
        if judge is None:
            return {**own, "network": "none"}
        named = {name: value for name in ("cpus", "memory", "network") if (value := getattr(judge, name)) is not None}
        return {**own, "user": judge.user, **named}

    def expectations(self) -> dict:
        """The task's own expectations that are set (what expectations.json keeps for a rescore)."""
        if self.expected_tool_calls is None and self.max_steps is None and self.max_tokens is None:
            return {}  # most tasks (a 100k resume asks each)
        return {name: value for name in ("expected_tool_calls", "max_steps", "max_tokens")
                if (value := getattr(self, name)) is not None}


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset: its instances, their fingerprint (fingerprint.py) and, for a Hub dataset, the
    commit sha it was read at (hub.py)."""

    instances: list[Instance]
    fingerprint: str
    revision: str | None = None
