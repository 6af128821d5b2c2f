"""A Gaia2 scenario's apps as tools (Emails, Calendar, Messages, the user's interface...), offered for the
instances of the gaia2 dataset adapter (harness/datasets/gaia2.py) and served by ARE in their sandbox
(harness/environments/gaia2.py); ARE's verdict of the run is this family's `verdict`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.family import Setup, Tool, ToolFamily
from harness.environments.gaia2 import Gaia2Env

if TYPE_CHECKING:
    from harness.models.config import ModelSection
    from harness.models.meter import Meter

T = TypeVar("T")


class Gaia2(ToolFamily[Gaia2Env]):
    name, order = "gaia2", 95

    def offered(self, setup: Setup) -> bool:
        return setup.instance is not None and setup.instance.metadata.get("benchmark") == "gaia2"

    def build(self, setup: Setup, envs: Environments) -> Gaia2Env | None:
        scenario = setup.instance.metadata.get("scenario_file") if setup.instance is not None else None
        if not scenario or setup.instance is None:
            return None
        variant = setup.instance.metadata.get("variant")
        return Gaia2Env(f"/workspace/{scenario}", judge=setup.judge, noise=variant == "noise",
                        a2a=variant == "agent2agent", agent=setup.model)

    def refusal(self, instance: Instance, model: ModelSection | None = None) -> str | None:
        """Gaia2's agent2agent phase runs ARE's app agents on the agent's own model: a model that answers any
        request. A replay model answers its recorded turns in order, which the app agents' calls (asked
        in ARE's sandbox, in an order no recording fixes) cannot share."""
        if instance.metadata.get("benchmark") != "gaia2" or instance.metadata.get("variant") != "agent2agent":
            return None
        if model is not None and model.kind != "openai":
            return (f"Gaia2's agent2agent phase runs ARE's app agents on the agent's model, which a {model.kind} "
                    f"model ({model.name}) cannot serve: give --model a provider's section")
        return None

    def metered(self, env: Gaia2Env, meter: Meter) -> None:
        env.meter = meter  # ARE's app agents' calls are the agent's

    async def serve(self, setup: Setup, env: Gaia2Env, envs: Environments, work: Callable[[], Awaitable[T]]) -> T:
        from harness.environments.gaia2 import serving

        return await serving(env, envs, work)

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        env = envs.of(Gaia2)
        return list(env.tools) if env is not None else []

    def verdict(self, env: Gaia2Env) -> dict[str, Any] | None:
        return env.verdict

    def clock(self, env: Gaia2Env) -> Gaia2Env:
        return env  # ARE's simulated clock stands still while the model generates
