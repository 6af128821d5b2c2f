"""Every check of a run before any container starts, past its configuration's own (harness/config.py).

The dataset and the selection's ids, the agent, the simulated user's function, the provider, the
website's folder, the model sections against this machine (replay file, key variables), the
scorers, the prompt template, replay coverage and the output dir are checked here (InputError,
exit 2); the model preflight and the capacity check follow in run.py once the engine answers.

The agent is checked at load (harness/agents/registry.py) and then built once without a
sandbox (`AgentRunner.preflight`), with every tool the run offers but the MCP servers' (known only
once a server runs: harness/agents/dry.py), which also gives the model preflight its first request,
made the way the runner makes its calls (models/probe.py).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.agents.registry import load_runner
from harness.agents.user import reply_function
from harness.config import RunConfiguration, Sandbox
from harness.datasets import load_dataset, select
from harness.datasets.model import Instance
from harness.datasets.packed import check_output_outside
from harness.environments.images import image_files
from harness.environments.websearch.env import check_key
from harness.errors import HarnessError, InputError
from harness.models.config import ModelSection, check_section
from harness.models.probe import ModelCheck, clean, probe_section
from harness.models.replay import Turns, has_turns, load_turns
from harness.report.capabilities import WEB
from harness.report.capabilities import labels as capability_labels
from harness.results.layout import RunDir
from harness.runner.prompt import DEFAULT as DEFAULT_PROMPT
from harness.runner.prompt import PromptTemplate, load_template
from harness.runner.scorers import build_scorers
from harness.sandbox.contract import Capacity, parse_size
from harness.sandbox.registry import get_provider
from harness.sandbox.site import site_info
from harness.terminal import listed


@dataclass
class Prepared:
    """What validation found: the instances, the model sections in use, the scorers."""

    instances: list[Instance]  # the whole dataset (its fingerprint: `getattr(instances, "fingerprint")`)
    selected: list[Instance]
    section: ModelSection
    scorers: list
    replay: Turns | None
    models: list[ModelCheck]  # every model the run calls, with the agent's first request (models/probe.py)
    prompt: PromptTemplate = DEFAULT_PROMPT  # the task's instruction (--prompt-template)


def prepare(cfg: RunConfiguration) -> Prepared:
    """Every check that needs no container (nor the engine). Raises InputError (exit 2)."""
    prompt = load_template(cfg.prompt_template)
    instances = load_dataset(cfg.dataset.path, cfg.dataset.split)
    selected = select(instances, **cfg.selection.model_dump())
    section = check_section(cfg.model)
    first_request = _check_agent(cfg, section, (selected or instances)[0])
    reply_function(cfg.user)
    get_provider(cfg.sandbox.provider)
    if cfg.sandbox.website is not None:
        site_info(cfg.sandbox.website)
    check_key(cfg.search)  # web_search's key variable is set (environments/websearch/env.py)
    scorers = build_scorers(cfg.scoring, cfg.replay.cache if cfg.replay.cache_judge else None)
    models = [ModelCheck("--model", section, first_request)]
    if cfg.scoring.judge is not None:
        models.append(ModelCheck("--judge-model", cfg.scoring.judge))
    replay = None
    if section.kind == "replay":
        replay = load_turns(Path(section.path or ""))
        missing = [i.instance_id for i in selected
                   if not all(has_turns(replay, i.instance_id, e) for e in range(1, cfg.epochs.count + 1))]
        if missing:
            raise InputError(f"replay file {section.path} has no turns for: {', '.join(missing[:10])}")
    check_output_outside(selected, cfg.output.dir, cfg.sandbox.website)  # never packed into a container
    _check_output_dir(cfg.output.dir)
    return Prepared(instances, selected, section, scorers, replay, models, prompt)


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
            f"text (the file's metadata). Set vision = true in [llm.{section.name}.model_info] for a vision model")


def unreachable_web(cfg: RunConfiguration, selected: list[Instance]) -> str | None:
    """A warning when selected instances need web browsing (their GAIA Annotator Metadata names a web
    tool: harness/report/capabilities.py) and the run offers no web: --network none, no --website and
    no search provider."""
    if cfg.sandbox.network != "none" or cfg.sandbox.website is not None or cfg.search.provider != "none":
        return None
    needing = [i.instance_id for i in selected if WEB in capability_labels(i.metadata).get("tool_family", ())]
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


def check_capacity(sandbox: Sandbox, capacity: Capacity | None) -> None:
    """Each sandbox's --cpus and --memory must fit the engine (None: the provider cannot tell)."""
    if capacity is None:
        return
    cpus, memory = sandbox.cpus, sandbox.memory
    if capacity.cpus and cpus > capacity.cpus:
        raise InputError(f"--cpus {cpus}: the engine has {capacity.cpus:g} CPU(s)")
    if capacity.memory and parse_size(memory) > capacity.memory:
        raise InputError(f"--memory {memory}: the engine has {capacity.memory / 2**30:.1f} GiB in all")


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


