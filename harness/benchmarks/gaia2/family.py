"""A Gaia2 scenario's apps as tools (Emails, Calendar, Messages, the user's interface...), offered for the
instances of the gaia2 dataset adapter (dataset.py) and served by ARE in their judge's sandbox, beside the agent's
(environment.py); and the benchmark's hooks on them in the agent's process: ARE's verdict of the run (`verdict`),
the agent's meter handed to ARE's app agents and ARE's clock paused while the model generates (`metered`), and the
runs it refuses; on the host, ARE's verdict of a run whose agent was killed (`verdict_after_kill`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from harness.benchmarks.gaia2.dataset import NAME
from harness.benchmarks.gaia2.environment import Gaia2Env
from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.family import Setup, Tool, ToolFamily

if TYPE_CHECKING:
    from harness.models.budget import BudgetSpec
    from harness.models.config import ModelSection
    from harness.models.meter import Meter
    from harness.sandbox.contract import Sandbox

T = TypeVar("T")


class Gaia2(ToolFamily[Gaia2Env]):
    name, order = "gaia2", 95

    def offered(self, setup: Setup) -> bool:
        return setup.instance is not None and setup.instance.benchmark == NAME

    def build(self, setup: Setup, envs: Environments) -> Gaia2Env | None:
        scenario = setup.instance.metadata.get("scenario_file") if setup.instance is not None else None
        if not scenario or setup.instance is None:
            return None
        variant = setup.instance.metadata.get("variant")
        named = f"{setup.instance.instance_id} ({setup.instance.root / scenario})"
        return Gaia2Env(f"/workspace/{scenario}", setup.judge_sandbox, judge=setup.judge, noise=variant == "noise",
                        a2a=variant == "agent2agent", agent=setup.model, named=named, run_number=setup.epoch)

    async def serve(self, setup: Setup, env: Gaia2Env, envs: Environments, work: Callable[[], Awaitable[T]]) -> T:
        from harness.benchmarks.gaia2.environment import serving

        return await serving(env, envs, work)

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        env = envs.of(Gaia2)
        return list(env.tools) if env is not None else []


def verdict(envs: Environments) -> dict[str, Any] | None:
    """ARE's verdict of the run, once the agent's turns are over (None: the scenario did not run)."""
    env = envs.of(Gaia2)
    return env.verdict if env is not None else None


def metered(envs: Environments, meter: Meter) -> None:
    """ARE's app agents' calls are the agent's (its meter counts and caps them); ARE's simulated clock stands still
    while the agent's model generates, as ARE's own agents pause it."""
    env = envs.of(Gaia2)
    if env is not None:
        env.meter = meter
        meter.clocks = [*meter.clocks, env]


def verdict_after_kill(instance: Instance, sandbox: Sandbox, judge: ModelSection | None,
                       budget: BudgetSpec | None = None) -> dict[str, Any] | None:
    """ARE's verdict of a run whose agent's process the parent killed (its wall-clock limit), asked of the driver
    that still runs in the sandbox (environment.py `verdict_after_kill`)."""
    from harness.benchmarks.gaia2.environment import verdict_after_kill as asked

    return asked(sandbox, judge, budget=budget)


def refusal(instance: Instance, model: ModelSection | None = None) -> str | None:
    """Gaia2's agent2agent phase runs ARE's app agents on the agent's own model: a model that answers any
    request. A replay model answers its recorded turns in order, which the app agents' calls (asked
    in ARE's sandbox, in an order no recording fixes) cannot share."""
    if instance.metadata.get("variant") != "agent2agent":
        return None
    if model is not None and model.kind != "openai":
        return (f"Gaia2's agent2agent phase runs ARE's app agents on the agent's model, which a {model.kind} "
                f"model ({model.name}) cannot serve: give --model a provider's section")
    return None
