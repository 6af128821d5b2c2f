"""What a run is asked to do (`RunOptions`), and every check before any container starts.

The dataset, selection, config, agent, simulated user, provider, website, memory floor,
scorers, prompt template, replay coverage and the output dir are checked here (InputError, exit 2); the
model preflight and the capacity check follow in run.py once the engine answers.

The agent is checked at load (harness/agents/registry.py) and then built once without a
sandbox (`AgentRunner.preflight`), which also gives the model preflight its first request,
made the way the runner makes its calls (models/probe.py).
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


from harness.agents.contract import Limits, UserSimulation
from harness.agents.registry import load_runner
from harness.agents.user import reply_function
from harness.datasets import load_dataset, select
from harness.datasets.packed import check_output_outside
from harness.errors import HarnessError, InputError
from harness.models.config import ModelSection, flag_section, load_config, model_section
from harness.models.probe import ModelCheck, clean, probe_section
from harness.models.replay import has_turns, load_turns
from harness.scoring.reducers import parse_reducer
from harness.results.layout import RunDir
from harness.runner.prompt import DEFAULT as DEFAULT_PROMPT, PromptTemplate, load_template
from harness.runner.scorers import build_scorers, judge_section
from harness.sandbox.contract import parse_size
from harness.sandbox.registry import DEFAULT, get_provider
from harness.sandbox.site import site_info

MIN_MEMORY = "64m"  # below this the sandbox's own service and Python do not start reliably


@dataclass(frozen=True)
class ErrorBudget:
    """--fail-on-error: a number of errored instances, or a fraction of the selected ones."""

    text: str
    count: int | None = None
    fraction: float | None = None

    def threshold(self, selected: int) -> int:
        if self.count is not None:
            return self.count
        return max(1, math.ceil(self.fraction * selected))


def error_budget(text: str | None) -> ErrorBudget | None:
    """'5' -> five errors; '0.2' or '20%' -> a fifth of the selected instances. InputError otherwise."""
    if text is None:
        return None
    raw = text.strip()
    try:
        if raw.endswith("%") or "." in raw:
            fraction = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
            if 0 < fraction <= 1:
                return ErrorBudget(text=raw, fraction=fraction)
        elif int(raw) >= 1:
            return ErrorBudget(text=raw, count=int(raw))
    except ValueError:
        pass
    raise InputError(f"--fail-on-error takes a count >= 1 or a fraction in (0, 1] like 0.2 or 20%, not {text!r}")


@dataclass
class RunOptions:
    dataset: Path
    model: str
    output_dir: Path
    model_base_url: str | None = None  # with --model openai-compatible/NAME (models/config.py flag_section)
    model_key_env: str | None = None
    split: str | None = None
    agent: str = "assistant"
    workers: int = 2
    config: Path | None = None
    max_retries: int = 2
    limits: Limits = field(default_factory=Limits)
    scorers: list[str] = field(default_factory=lambda: ["gaia"])
    selection: dict = field(default_factory=dict)  # ids, skip, offset, stride, shuffle, seed, limit
    sandbox: dict = field(default_factory=dict)  # memory, cpus, pids, network
    provider: str = DEFAULT  # --sandbox
    user: UserSimulation = field(default_factory=UserSimulation)
    force: bool = False
    epochs: int = 1  # --epochs: runs of each instance, each in a fresh sandbox
    warm_pool: int = 0  # --warm-pool: sandboxes kept started ahead of the instances (runner/pool.py)
    reducers: list[str] = field(default_factory=list)  # --reducer (checked by parse_reducer)
    record: Path | None = None
    summary_csv: Path | None = None
    judge_model: str | None = None
    website: Path | None = None  # an offline site folder (harness/sandbox/site.py)
    prompt_template: Path | None = None  # --prompt-template FILE (runner/prompt.py); None: the default
    fail_on_error: ErrorBudget | None = None
    fail_on_divergence: bool = False  # replay models: exit 5 when a tool result diverges (models/replay.py)
    all_instances: list = field(default_factory=list)  # filled by validation: the whole dataset


@dataclass
class Prepared:
    """What validation found: the instances, the model sections in use, the scorers."""

    instances: list
    selected: list
    section: ModelSection
    scorers: list
    replay: dict | None
    models: list[ModelCheck]  # every model the run calls, with the agent's first request (models/probe.py)
    prompt: PromptTemplate = DEFAULT_PROMPT  # the task's instruction (--prompt-template)


def prepare(opts: RunOptions) -> Prepared:
    """Every check that needs no container (nor the engine). Raises InputError (exit 2)."""
    if opts.workers < 1:
        raise InputError("--workers must be >= 1")
    if opts.max_retries < 0:
        raise InputError("--max-retries must be >= 0")
    if opts.warm_pool < 0:
        raise InputError(f"--warm-pool must be >= 0, not {opts.warm_pool}")
    if opts.epochs < 1:
        raise InputError(f"--epochs must be >= 1, not {opts.epochs}")
    opts.reducers = [parse_reducer(name, opts.epochs) for name in opts.reducers] or ["mean"]
    if opts.epochs == 1 and opts.reducers != ["mean"]:
        raise InputError("--reducer needs --epochs K > 1 (one epoch has nothing to reduce)")
    prompt = load_template(opts.prompt_template)
    instances = load_dataset(opts.dataset, opts.split)
    selected = select(instances, **opts.selection)
    opts.all_instances = instances
    config = load_config(opts.config)
    root = Path(opts.dataset) if Path(opts.dataset).is_dir() else Path(opts.dataset).parent
    section = (flag_section(opts.model, opts.model_base_url, opts.model_key_env)
               or model_section(config, opts.model, dataset_root=root))
    first_request = _check_agent(opts, section, (selected or instances)[0])
    reply_function(opts.user)
    get_provider(opts.provider)
    if opts.website is not None:
        site_info(opts.website)
        if opts.sandbox.get("network", "none") != "none":
            raise InputError("--website gives sandboxes the site's internal network; drop --network")
    _check_memory_floor(opts.sandbox)
    scorers = build_scorers(opts.scorers, config, opts.judge_model)
    models = [ModelCheck("--model", section, first_request)]
    if any(name.partition(":")[0] == "llm_judge" for name in opts.scorers):
        models.append(ModelCheck("--judge-model", judge_section(config, opts.judge_model)))
    replay = None
    if opts.fail_on_divergence and section.kind != "replay":
        raise InputError(f"--fail-on-divergence needs a replay model; --model {opts.model} is not one")
    if section.kind == "replay":
        replay = load_turns(Path(section.path))
        missing = [i.instance_id for i in selected
                   if not all(has_turns(replay, i.instance_id, e) for e in range(1, opts.epochs + 1))]
        if missing:
            raise InputError(f"replay file {section.path} has no turns for: {', '.join(missing[:10])}")
    check_output_outside(selected, opts.output_dir, opts.website)  # never packed into a container
    _check_output_dir(opts.output_dir)
    return Prepared(instances, selected, section, scorers, replay, models, prompt)


def unserved_website(opts: RunOptions) -> str | None:
    """A warning when the dataset's folder ships an offline website (`website/`) and --website is not
    given: the tasks' web actions would fail (a replay then diverges from its recording)."""
    root = Path(opts.dataset) if Path(opts.dataset).is_dir() else Path(opts.dataset).parent
    site = root / "website"
    if opts.website is not None or not site.is_dir():
        return None
    return f"warning: the dataset ships a website ({site}) but --website is not given: its web actions will fail"


def _check_agent(opts: RunOptions, section: ModelSection, instance):
    """The agent loaded and built once without a sandbox, with the run's model; its first model request."""
    runner_cls, target = load_runner(opts.agent)
    try:
        return runner_cls.preflight(target, probe_section(section), instance, opts.limits)
    except HarnessError as exc:
        raise InputError(f"--agent {opts.agent}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - whatever the agent's code raised, it would raise in every instance
        raise InputError(f"--agent {opts.agent} with {section.where()}: building the agent (before any sandbox) "
                         f"failed: {type(exc).__name__}: {clean(exc)}") from None


def _check_memory_floor(sandbox: dict) -> None:
    memory = sandbox.get("memory")
    if memory is not None and parse_size(memory) < parse_size(MIN_MEMORY):
        raise InputError(f"--memory {memory}: a sandbox needs at least {MIN_MEMORY}")


def check_capacity(sandbox: dict, capacity) -> None:
    """Each sandbox's --cpus and --memory must fit the engine (None: the provider cannot tell)."""
    if capacity is None:
        return
    cpus, memory = sandbox.get("cpus"), sandbox.get("memory")
    if cpus is not None and capacity.cpus and cpus > capacity.cpus:
        raise InputError(f"--cpus {cpus}: the engine has {capacity.cpus:g} CPU(s)")
    if memory is not None and capacity.memory and parse_size(memory) > capacity.memory:
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


