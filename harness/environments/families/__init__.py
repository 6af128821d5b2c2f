"""The tool-family registry: every `ToolFamily` defined (harness/environments/family.py), the built-in ones
being this package's modules, imported with it (so the agents' fork server, which imports
harness/runner/agent_process/child.py, has them before it forks), each benchmark's its own modules
(`Benchmark.families`, imported on the first look-up: `load_benchmarks`, which the fork server calls); a
plug-in agent's module may define more. What an instance's benchmark judged of its run (`verdicts`) and its
environment's hold on the agent's meter (`metering`) are asked of the benchmark (harness/benchmark.py).

`environments` builds each offered family's environment in order, `tools` gives their tools kit by kit,
`serving` runs the agent's turns inside each built family's `serve`; on the host, `check_run` and
`start_run` take every family's run-level steps in order.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from harness.benchmark import get, registered
from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.family import _REGISTERED, Kit, RunSetup, Setup, Tool, ToolFamily
from harness.errors import InputError
from harness.sandbox.contract import Sandbox

if TYPE_CHECKING:
    from harness.models.budget import BudgetSpec
    from harness.models.config import ModelSection
    from harness.models.meter import Meter

T = TypeVar("T")
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
_benchmarks_loaded = False


def load_benchmarks() -> None:
    """Import every benchmark's tool-family modules (once)."""
    global _benchmarks_loaded
    if not _benchmarks_loaded:
        for benchmark in registered():
            for module in benchmark.families:
                importlib.import_module(module)
        _benchmarks_loaded = True


def families() -> list[ToolFamily]:
    """Every registered family, in tool order (kit by kit)."""
    load_benchmarks()
    return sorted(_REGISTERED.values(), key=lambda f: (f.kit != "sandbox", f.order))


def verdicts(envs: Environments, instance: Instance | None) -> dict[str, dict]:
    """What the instance's benchmark judged of its run (`Benchmark.verdict`), under the benchmark's name."""
    benchmark = get(instance.benchmark) if instance is not None else None
    if benchmark is None or benchmark.verdict is None or (found := benchmark.verdict(envs)) is None:
        return {}
    return {benchmark.name: found}


def verdicts_after_kill(instance: Instance, sandbox: Sandbox, judge: ModelSection | None,
                        budget: BudgetSpec | None = None) -> dict[str, dict]:
    """What the instance's benchmark still judges of its run once its agent's process was killed, on the host
    before the sandbox goes (`Benchmark.verdict_after_kill`), under the benchmark's name; `sandbox`: where its
    judging runs (its judge's sandbox when it has one)."""
    benchmark = get(instance.benchmark)
    asked = benchmark.verdict_after_kill
    found = asked(instance, sandbox, judge, budget) if asked is not None else None
    return {} if found is None else {benchmark.name: found}


def record(instance: Instance, sandbox: Sandbox) -> tuple[str, bytes] | None:
    """The instance's benchmark's own record of its run (`Benchmark.record`), read in `sandbox` (where its judging
    ran) before it goes: the suffix of its file beside the run's trace, and its bytes; None: it keeps none."""
    asked = get(instance.benchmark).record
    return asked(sandbox) if asked is not None else None


def metering(envs: Environments, meter: Meter, instance: Instance | None) -> None:
    """The agent's meter, handed to the built families whose tools make paid calls (`ToolFamily.metered`) and to
    the instance's benchmark's environment (`Benchmark.metered`): the clocks it pauses while the model generates,
    the model calls of the agent's own the environment makes."""
    meter.clocks = []
    for family in families():  # the paid tools' calls go through the meter (ToolFamily.metered)
        if family.name in envs.built:
            family.metered(envs.built[family.name], meter)
    benchmark = get(instance.benchmark) if instance is not None else None
    if benchmark is not None and benchmark.metered is not None:
        benchmark.metered(envs, meter)


def check_run(run: RunSetup) -> list[str]:
    """Every family's preflight, in order; the warnings they give (InputError from the first that fails)."""
    return [warned for family in families() if (warned := family.check(run)) is not None]


def start_run(run: RunSetup, stack: contextlib.ExitStack) -> RunSetup:
    """Every family's run-level start, in order, each on the run setup the one before gave."""
    for family in families():
        run = family.start(run, stack)
    return run


ONLY = "tool_families"  # an instance's metadata key: the only families whose tools its agent gets
BASE = "code"  # built for every instance all the same: its environment holds the sandbox and the tracer


def allowed(instance: Instance | None) -> set[str] | None:
    """The families an instance restricts its agent to (its metadata's `tool_families`), or None: every offered one."""
    only = instance.metadata.get(ONLY) if instance is not None else None
    return set(only) if isinstance(only, list) else None


def check_tool_families(instances: list[Instance], model: ModelSection | None = None) -> None:
    """InputError naming each instance whose `tool_families` is not a list of known family names, or whose
    benchmark refuses to run it (`Benchmark.refusal`: for the run's `model`)."""
    known, bad = {f.name for f in families()}, []
    for instance in instances:
        only = instance.metadata.get(ONLY)
        if only is not None and (not isinstance(only, list) or not set(only) <= known):
            bad.append(f"{instance.instance_id}: {only!r}")
    if bad:
        raise InputError(f"tool_families must be a list of tool families ({', '.join(sorted(known))}); "
                         f"not so for {'; '.join(bad[:10])}" + (f" and {len(bad) - 10} more" if len(bad) > 10 else ""))
    refused = [f"{instance.instance_id}: {why}" for instance in instances
               if (refusal := get(instance.benchmark).refusal) is not None and (why := refusal(instance, model))]
    if refused:
        raise InputError("instances no tool family can serve: " + "; ".join(refused[:10])
                         + (f" and {len(refused) - 10} more" if len(refused) > 10 else ""))


def environments(setup: Setup, on_fatal: Callable[[BaseException], None] | None = None) -> Environments:
    """Each offered family's environment, built in order (a family may build on an earlier one's); of an instance
    that names its families (`allowed`), those and the base alone."""
    envs, only = Environments(on_fatal=on_fatal), allowed(setup.instance)
    for family in families():
        if only is not None and family.name not in only and family.name != BASE:
            continue
        if family.offered(setup) and (env := family.build(setup, envs)) is not None:
            envs.built[family.name] = env
    return envs


def tools(envs: Environments, instance: Instance | None = None, kit: Kit | None = None) -> list[Tool]:
    """The tools of every family (of one kit), in order; of an instance that names its families, theirs alone."""
    only = allowed(instance)
    return [tool for family in families() if kit in (None, family.kit) and (only is None or family.name in only)
            for tool in family.tools(envs, instance)]


async def serving(setup: Setup, envs: Environments, work: Callable[[], Awaitable[T]]) -> T:
    """Await `work` (the agent's turns) inside every built family's `serve`, the first family outermost."""
    built = [f for f in families() if f.name in envs.built]

    async def within(index: int) -> T:
        if index == len(built):
            return await work()
        family = built[index]
        return await family.serve(setup, envs.built[family.name], envs, lambda: within(index + 1))

    return await within(0)
