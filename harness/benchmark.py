"""A benchmark, declared in one place, and the registry that finds every one.

A benchmark is a package of its own (the built-in ones: harness/benchmarks/NAME/) exposing one `Benchmark`:
its dataset adapters, image, scorers and default scorers, the scorers that can judge it, its default epochs,
its prompt conventions, its simulated-user policy, its oracle, its tool families, its report figures and
words, its exports and its run-level settings. Generic code never names a benchmark: it asks the instance's
(`Instance.benchmark`, a name; "custom", a user's own JSONL/CSV, by default) through `get`.

This module sits in the lowest shared layer: what it declares from the layers above (a dataset, an instance,
the agent's environments, a run to export) is typed by the Protocols and callables below, never imported.

Registry: every benchmark registers through the entry-point group `harness.benchmarks` (pyproject.toml
`[project.entry-points."harness.benchmarks"]`, a third party's package in its own), each naming a
`Benchmark`; they are loaded on the first look-up (importlib.metadata). The built-in packages are found
in harness/benchmarks/ too, so a checkout whose installation predates an entry point still knows them.
A test may `register` one directly (and `unregister` it).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.errors import InputError

GROUP = "harness.benchmarks"  # the entry-point group
CUSTOM = "custom"  # a user's own dataset: Instance.benchmark's default
PACKAGE = "harness.benchmarks"  # the built-in benchmarks' packages


class Adapter(Protocol):
    """A dataset format: what it would read at `path` (None: not its format), and reading it (a Dataset:
    harness/datasets/model.py; InputError listing every problem)."""

    def detect(self, path: Path) -> Path | None: ...

    def load(self, found: Path, split: str | None) -> Any: ...


class Phases(Protocol):
    """A benchmark whose configs run in phases (Gaia2's `mini_noise`: its mini config in the noise phase)."""

    def phase(self, subset: str | None) -> tuple[str | None, str | None]:
        """(the config's folder, the phase) of a --subset; (subset, None) when it names no phase."""
        ...

    def in_phase(self, dataset: Any, phase: str | None) -> Any:
        """The dataset with its instances in `phase` (as it is for None)."""
        ...


@dataclass(frozen=True)
class Words:
    """What a report calls things of this benchmark (one name per state everywhere)."""

    instances: str = "instances"
    rate: str = "accuracy"
    correct: str = "correct"
    wrong: str = "wrong answer"
    unjudged: str = "no verdict"
    groups: str = "level"  # what instances are grouped by in the headline ("" : no grouping)
    target: str = "target"  # what an instance's expected answer is called ("": it has none to show)


@dataclass(frozen=True)
class Figures:
    """A benchmark's own report figures: `applies(tasks)` says whether a run's tasks (tasks.json) are its own,
    `figures(latest, selected, epochs, tasks, costs)` computes them from the run's rows (report.json keeps them
    under the benchmark's name), `lines(figures)` says them on the terminal as (label, value) pairs; `fields`:
    the task labels shown there, left out of the generic breakdown; `warning(figures)`: what they must be read with
    (None: nothing), said after the table."""

    applies: Callable[[Mapping[str, Mapping[str, Any]]], bool]
    figures: Callable[..., dict[str, Any]]
    lines: Callable[[dict[str, Any]], list[tuple[str, str]]]
    fields: tuple[str, ...] = ()
    warning: Callable[[dict[str, Any]], str | None] | None = None  # how the figures must be read, said at the end


@dataclass(frozen=True)
class Export:
    """One export format (`harness export --format NAME`): `render(run, **options)` gives (the file's text, or
    for a `folder` format a function filling the folder, and the warnings); `options`: the export flags it
    takes (allow_missing, allow_partial)."""

    render: Callable[..., tuple[Any, list[str]]]
    folder: bool = False
    options: tuple[str, ...] = ()


# The agent process's hooks; their arguments belong to layers above this one (typed there):
Verdict = Callable[[Any], "dict[str, Any] | None"]  # (the instance's Environments) -> what it judged, or None
# (Instance, its Sandbox, the run's judge ModelSection or None, the run's --max-cost BudgetSpec or None) -> what it
# judged of a run whose agent's process was killed at its wall-clock limit, asked on the host before the sandbox
# goes, or None
VerdictAfterKill = Callable[[Any, Any, Any, Any], "dict[str, Any] | None"]
# (the Sandbox its judging ran in, before it goes) -> a file of the benchmark's own record of the run to keep beside
# its trace: (its name's suffix, replacing the trace's .jsonl; its bytes), or None
Record = Callable[[Any], "tuple[str, bytes] | None"]
Refusal = Callable[[Any, Any], "str | None"]  # (Instance, the run's ModelSection or None) -> why it cannot run
Metered = Callable[[Any, Any], None]  # (Environments, the agent's Meter): hand it the meter, its clocks
Oracle = Callable[[Any], Any]  # (AgentContext) -> awaitable of the oracle's final message
Explain = Callable[[dict[str, Any]], "str | None"]  # (its verdict of a run) -> what a report says of a failed one
Labels = Callable[[Mapping[str, Any]], dict[str, Any]]  # (an instance's metadata) -> its labels in tasks.json
NeedsWeb = Callable[[Mapping[str, Any]], bool]  # (an instance's metadata) -> whether its task needs the web


@dataclass(frozen=True)
class Benchmark:
    name: str
    title: str
    adapters: tuple[Adapter, ...] = ()
    order: int = 50  # its adapters' place among every benchmark's: the specific layouts before the general
    prefix: str | None = None  # `--dataset NAME:PATH` names one of its datasets outright (harbor:PATH)
    phases: Phases | None = None
    image: str | None = None  # its sandbox image (images/NAME); None: the sandbox image
    # Its instances get a judge's sandbox: a second sandbox of their image, with no network, beside the agent's and
    # reached by the host alone, where their files go (never into the agent's) and its families run what decides
    # the verdict (`Setup.judge_sandbox`; docs/sandboxes.md, "The judge's sandbox"). For files that hold the answer.
    judge_sandbox: bool = False
    # Its sandboxes of a task's own image keep a writable root filesystem, --disk bounding it still
    # (`SandboxSpec.writable_root`; docs/sandboxes.md, "Disk"): for tasks that install anywhere (Harbor's).
    writable_root: bool = False
    scorers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)  # the scorers it defines, by name
    default_scorers: tuple[str, ...] = ("gaia",)  # judge it when no --scorer is given; the first decides
    judges: tuple[str, ...] | None = None  # the scorers that can judge it; None: any scorer of an answer
    epochs: int = 1  # its default --epochs
    conventions: str = ""  # the prompt's {conventions}: how to work and how an answer ends
    # The built-in agents' system message for its instances ({workdir}: the sandbox's working directory); None:
    # the runners' own, for a task answered in text from files in the sandbox (harness/agents/system.py).
    system: str | None = None
    files_shown: bool = True  # the prompt names its task files (False: they are its environment's own)
    user: bool = True  # the simulated user answers a turn that ends without <solution>
    oracle: Oracle | None = None  # `--agent oracle`: its reference solution, through the agent's tools
    families: tuple[str, ...] = ()  # the modules defining its tool families (imported by the agent process)
    verdict: Verdict | None = None  # what its environment judged of the run (ScoreContext.verdicts[name])
    verdict_after_kill: VerdictAfterKill | None = None  # the same, of a run killed at its wall-clock limit
    record: Record | None = None  # its own record of a run, kept beside the run's trace (Gaia2: ARE's trace)
    refusal: Refusal | None = None
    metered: Metered | None = None
    words: Words = Words()
    explain: Explain | None = None  # a failed or unjudged instance's line in a report, from its verdict
    labels: Labels | None = None  # what the report breaks its accuracy down by (GAIA's: tool family, steps)
    needs_web: NeedsWeb | None = None  # an instance that needs the web (the preflight warns when the run has none)
    figures: Figures | None = None
    exports: Mapping[str, Export] = field(default_factory=dict)
    settings: type | None = None  # its own run-level settings (a pydantic model), when it has any

    def can_judge(self, scorer: str) -> bool:
        return self.judges is None or scorer in self.judges


_REGISTERED: dict[str, Benchmark] = {}
_lock = threading.Lock()
_loaded = False


def register(benchmark: Benchmark) -> Benchmark:
    """Register `benchmark` (an entry point's, or a test's directly); TypeError for another of its name."""
    known = _REGISTERED.get(benchmark.name)
    if known is not None and known is not benchmark:
        raise TypeError(f"two benchmarks are named {benchmark.name!r}: {known.title} and {benchmark.title}")
    _REGISTERED[benchmark.name] = benchmark
    return benchmark


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)


def _load() -> None:
    global _loaded
    if _loaded:  # every look-up asks: no lock once loaded
        return
    from importlib.metadata import entry_points  # ~0.1 s: only for a process that looks a benchmark up

    with _lock:
        if _loaded:
            return
        for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
            try:
                found = point.load()
            except Exception as exc:  # noqa: BLE001 - a third party's package: said, naming it
                raise InputError(f"the benchmark entry point {point.name} = {point.value} cannot be loaded: "
                                 f"{type(exc).__name__}: {exc}") from None
            if not isinstance(found, Benchmark):
                raise InputError(f"the benchmark entry point {point.name} = {point.value} is a "
                                 f"{type(found).__name__}, not a Benchmark")
            register(found)
        package = importlib.import_module(PACKAGE)
        for module in pkgutil.iter_modules(package.__path__):
            found = getattr(importlib.import_module(f"{PACKAGE}.{module.name}"), "BENCHMARK", None)
            if isinstance(found, Benchmark) and found.name not in _REGISTERED:
                register(found)
        _loaded = True


def registered() -> list[Benchmark]:
    """Every benchmark, in adapter order."""
    _load()
    return sorted(_REGISTERED.values(), key=lambda b: (b.order, b.name))


def get(name: str) -> Benchmark:
    """The benchmark named `name`; InputError naming the known ones."""
    _load()
    try:
        return _REGISTERED[name]
    except KeyError:
        raise InputError(f"unknown benchmark {name!r}; known: {', '.join(sorted(_REGISTERED))}") from None


def scorer_factories() -> dict[str, Callable[..., Any]]:
    """Every benchmark's scorers, by name."""
    return {name: factory for b in registered() for name, factory in b.scorers.items()}


def exports() -> dict[str, tuple[Benchmark, Export]]:
    """Every benchmark's export formats, by name."""
    return {name: (b, export) for b in registered() for name, export in b.exports.items()}
