"""Every check of a run before any container starts, past its configuration's own (harness/config.py).

The dataset and the selection's ids, the agent, the simulated user's function, the provider and its
capabilities against the flags (--website, --web-record/--web-replay), the website's folder, a
--web-replay's archives and search index (read whole: web/archives.py, websearch/site.py), the model sections
against this machine (replay file, key variables), the scorers, the prompt template, replay coverage and the
output dir are checked here (InputError, exit 2); the model preflight and the capacity check follow in
phases/preflight.py once the engine answers.

The agent is checked at load (harness/agents/registry.py) and then built once without a
sandbox (`AgentRunner.preflight`), with every tool the run offers but the MCP servers' (known only
once a server runs: harness/agents/dry.py), which also gives the model preflight its first request,
made the way the runner makes its calls (models/probe.py).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.agents.registry import NO_MODEL, load_runner
from harness.agents.user import reply_function
from harness.benchmark import get
from harness.config import RunConfiguration, Sandbox
from harness.datasets import load_dataset, select
from harness.datasets.model import Dataset, Instance
from harness.datasets.packed import check_output_outside
from harness.environments.families import check_tool_families
from harness.environments.images import image_files
from harness.environments.websearch.settings import SearchSettings, check_key
from harness.environments.websearch.site import index_problem
from harness.errors import HarnessError, InputError
from harness.models.config import ModelSection, check_section
from harness.models.probe import ModelCheck, clean, probe_section
from harness.models.replay import Turns, has_turns, load_turns
from harness.results.layout import RunDir
from harness.runner.prompt import DEFAULT as DEFAULT_PROMPT
from harness.runner.prompt import PromptTemplate, load_template
from harness.runner.scorers import build_scorers, judging
from harness.sandbox.contract import Capacity, SandboxProvider, parse_size
from harness.sandbox.registry import get_provider
from harness.sandbox.site import site_info
from harness.terminal import listed
from harness.web.archives import archive_problem
from harness.web.recorded import recorded_site_index, web_archives


@dataclass(frozen=True)
class Prepared:
    """What validation found: the dataset and its selection, the model sections in use, the scorers."""

    dataset: Dataset  # the whole dataset, its fingerprint and revision
    selected: list[Instance]
    section: ModelSection
    scorers: list
    replay: Turns | None
    models: list[ModelCheck]  # every model the run calls, with the agent's first request (models/probe.py)
    prompt: PromptTemplate = DEFAULT_PROMPT  # the task's instruction (--prompt-template)
    config: RunConfiguration | None = None  # the run's configuration with the dataset's defaults (default_epochs)


def default_epochs(cfg: RunConfiguration, dataset: Dataset) -> RunConfiguration:
    """`cfg` with the dataset's benchmark's default epochs when --epochs was not given (`Benchmark.epochs`: Gaia2's
    3, as ARE's leaderboard runs each scenario: its pass@3 and pass^3; the most of a mixed dataset's); else `cfg`
    as it is (an explicit --epochs 1 stands)."""
    if cfg.epochs.given:
        return cfg
    most = max((get(name) for name in {i.benchmark for i in dataset.instances}), key=lambda b: b.epochs, default=None)
    if most is None or most.epochs == 1:
        return cfg
    epochs = cfg.epochs.model_copy(update={"count": most.epochs, "default": most.name})
    return cfg.model_copy(update={"epochs": epochs})


def prepare(cfg: RunConfiguration) -> Prepared:
    """Every check that needs no container (nor the engine). Raises InputError (exit 2)."""
    prompt = load_template(cfg.prompt_template)
    dataset = load_dataset(cfg.dataset.path, cfg.dataset.split, cfg.dataset.subset)
    cfg = default_epochs(cfg, dataset)
    cfg = cfg.model_copy(update={"scoring": judging(cfg.scoring, {i.benchmark for i in dataset.instances})})
    selected = select(dataset.instances, **cfg.selection.model_dump())
    oracle_alone = cfg.agent in NO_MODEL and cfg.model.kind == "replay" and not Path(cfg.model.path or "").is_file()
    section = cfg.model if oracle_alone else check_section(cfg.model)  # oracle and nop call no model: no file needed
    first_request = _check_agent(cfg, section, (selected or dataset.instances)[0])
    reply_function(cfg.user)
    check_capabilities(cfg.sandbox, get_provider(cfg.sandbox.provider))
    if cfg.sandbox.website is not None:
        site_info(cfg.sandbox.website)
    check_recorded_web(cfg.sandbox, cfg.search)
    check_key(cfg.search)  # web_search's key variable is set (environments/websearch/settings.py)
    scorers = build_scorers(cfg.scoring, cfg.replay.cache if cfg.replay.cache_judge else None)
    budget = " and ".join(flag for flag, value in (("--max-cost", cfg.execution.max_cost),
                                                   ("--max-instance-cost", cfg.limits.max_instance_cost)) if value)
    models = [ModelCheck("--model", section, first_request, budget)]
    if cfg.scoring.judge is not None:
        models.append(ModelCheck("--judge-model", cfg.scoring.judge, budget=budget))
    replay = None
    if section.kind == "replay" and not oracle_alone:
        replay = load_turns(Path(section.path or ""))
        epochs = range(1, cfg.epochs.count + 1)  # an instance's own line covers every epoch (has_turns)
        missing = [i.instance_id for i in selected if i.instance_id not in replay
                   and not all(has_turns(replay, i.instance_id, e) for e in epochs)]
        if missing:
            raise InputError(f"replay file {section.path} has no turns for: {', '.join(missing[:10])}")
    check_output_outside(selected, cfg.output.dir, cfg.sandbox.website)  # never packed into a container
    check_tool_families(selected, section)
    _check_output_dir(cfg.output.dir)
    return Prepared(dataset, selected, section, scorers, replay, models, prompt, cfg)


def unserved_website(cfg: RunConfiguration) -> str | None:
    """A warning when the dataset's folder ships an offline website (`website/`) and --website is not
    given: the tasks' web actions would fail (a replay then diverges from its recording)."""
    site = cfg.dataset.root / "website"
    if cfg.sandbox.website is not None or not site.is_dir():
        return None
    return f"warning: the dataset ships a website ({site}) but --website is not given: its web actions will fail"


def unseen_images(section: ModelSection, selected: list[Instance]) -> str | None:
    """A warning when selected instances carry image attachments and the model is not shown images
    (`model_info.vision` is not true): they reach it only as markitdown's metadata text."""
    if section.vision:
        return None
    with_images = [i.instance_id for i in selected if image_files(i.files)]
    if not with_images:
        return None
    more = f" (+{len(with_images) - 5} more)" if len(with_images) > 5 else ""
    return (f"warning: {len(with_images)} selected instance(s) carry images that {section.where()} cannot see "
            f"(model_info.vision is not true): {', '.join(with_images[:5])}{more}; they reach it only as "
            f"text (the file's metadata). For a vision model, {section.set_in('vision = true', '.model_info')}")


def unreachable_web(cfg: RunConfiguration, selected: list[Instance]) -> str | None:
    """A warning when selected instances need web browsing (their GAIA Annotator Metadata names a web
    tool: their benchmark's `needs_web`) and the run offers no web: --network none, no --website and
    no search provider."""
    if cfg.sandbox.network != "none" or cfg.sandbox.website is not None or cfg.search.provider != "none":
        return None
    needing = [i.instance_id for i in selected
               if i.metadata and (needs := get(i.benchmark).needs_web) is not None and needs(i.metadata)]
    if not needing:
        return None
    return (f"warning: {len(needing)} selected instance(s) need web browsing (their Annotator Metadata names a web "
            f"tool) but the run has no web: --network none, no --website and no --search: {listed(needing, 5)}")


def _check_agent(cfg: RunConfiguration, section: ModelSection, instance: Instance):
    """The agent loaded and built once without a sandbox, with the run's model; its first model request."""
    runner_cls, target = load_runner(cfg.agent)
    try:
        return runner_cls.preflight(target, probe_section(section), instance, cfg.limits, cfg.search)
    except HarnessError as exc:
        raise InputError(f"--agent {cfg.agent}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - whatever the agent's code raised, it would raise in every instance
        raise InputError(f"--agent {cfg.agent} with {section.where()}: building the agent (before any sandbox) "
                         f"failed: {type(exc).__name__}: {clean(exc)}") from None


def check_capabilities(sandbox: Sandbox, provider: SandboxProvider) -> None:
    """The provider offers what the run's flags ask of it (its declared `Capabilities`)."""
    offered = provider.capabilities
    for flag, asked, has, what in (
            ("--website", sandbox.website is not None, offered.website, "serve an offline site"),
            ("--web-record/--web-replay", bool(sandbox.web_record or sandbox.web_replay), offered.web_proxy,
             "run a web proxy")):
        if asked and not has:
            raise InputError(f"{flag}: the sandbox provider {provider.label} cannot {what}")


def check_recorded_web(sandbox: Sandbox, search: SearchSettings) -> None:
    """Every archive a --web-replay serves, and the recorded index a `site` search reads, is whole."""
    for folder in sandbox.web_replay or ():
        for archive in web_archives(folder):
            if (problem := archive_problem(archive)) is not None:
                raise InputError(f"--web-replay {folder}: the web archive {archive} is {problem}; record the run "
                                 "again (or move the file out of web/ to replay without it)")
        index = recorded_site_index(folder)
        if search.provider == "site" and index is not None and (problem := index_problem(index)) is not None:
            raise InputError(f"--web-replay {folder}: the recorded site search index: {problem}; record the run "
                             "again (or search with another --search provider)")


def check_capacity(sandbox: Sandbox, capacity: Capacity | None, instances: Iterable[Instance] = ()) -> None:
    """Each sandbox's --cpus and --memory, and an instance's own (a task's), must fit the engine (None: the provider
    cannot tell)."""
    if capacity is None:
        return
    cpus, memory = sandbox.cpus, sandbox.memory
    if capacity.cpus and cpus > capacity.cpus:
        raise InputError(f"--cpus {cpus}: the engine has {capacity.cpus:g} CPU(s)")
    if capacity.memory and parse_size(memory) > capacity.memory:
        raise InputError(f"--memory {memory}: the engine has {capacity.memory / 2**30:.1f} GiB in all")
    for instance in instances:
        if capacity.cpus and instance.cpus is not None and instance.cpus > capacity.cpus:
            raise InputError(f"instance {instance.instance_id}: its own cpus {instance.cpus:g} are more than the "
                             f"engine's {capacity.cpus:g} CPU(s)")
        if capacity.memory and instance.memory is not None and parse_size(instance.memory) > capacity.memory:
            raise InputError(f"instance {instance.instance_id}: its own memory {instance.memory} is more than the "
                             f"engine's {capacity.memory / 2**30:.1f} GiB in all")


def _check_output_dir(path: Path) -> None:
    """The output dir can be made and takes new files, and an existing output.jsonl takes appends."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
        out = RunDir(path).output
        if out.exists() or out.is_symlink():
            os.close(os.open(out, os.O_WRONLY | os.O_APPEND))
    except OSError as exc:
        raise InputError(f"--output-dir {path} is not writable: {exc}") from None


