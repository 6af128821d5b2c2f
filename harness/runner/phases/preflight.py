"""Phase 1, preflight: every check that can fail for every instance, before anything is written.

The checks that need no engine (runner/preflight.py `prepare`: dataset, selection, config, agent,
capabilities, replay coverage, the output dir), one preflight call to each model the run uses
(models/probe.py), the engine, image and network policy (the provider's `preflight`), the sandboxes'
resources against the engine's capacity, and every tool family's run-level check (environments/family.py
`check`: one search to a hosted search provider, every MCP server started and its tools listed). Warnings
are said; a failure raises InputError (exit 2). `validate` (the engine-free part) runs first; the rest,
`preflight`, only for a run with something to run (phases/idle.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from harness.config import RunConfiguration
from harness.datasets.model import Instance
from harness.environments.families import check_run
from harness.environments.family import RunSetup
from harness.errors import InputError
from harness.fsutil import slug
from harness.models.probe import probe_all
from harness.runner.preflight import Prepared, check_capacity, prepare, unreachable_web, unseen_images, unserved_website
from harness.sandbox.contract import ENGINE_IMAGE, SandboxProvider, SandboxSpec
from harness.terminal import say


@dataclass(frozen=True)
class Checked:
    """What the preflight found and made: the validated run, its sandbox image, its id."""

    prepared: Prepared
    image: str
    run_id: str
    images: Mapping[str, str] = field(default_factory=dict)  # an instance's own image (Instance.image): its reference


def validate(cfg: RunConfiguration, console: Console) -> Prepared:
    """The checks that need no engine nor model (runner/preflight.py `prepare`), and their warnings; the
    configuration with the dataset's defaults is `prepared.config` (said when it differs)."""
    prepared = prepare(cfg)
    if prepared.config is not None and prepared.config.epochs.default:
        say(console, f"{prepared.config.epochs.default}: each instance runs {prepared.config.epochs.count} times "
                     "(its default, as its leaderboard runs; --epochs 1 for one run)")
    for warned in (unserved_website(cfg), unreachable_web(cfg, prepared.selected),
                   unseen_images(prepared.section, prepared.selected)):
        if warned is not None:
            say(console, warned, style="yellow")
    return prepared


def new_run_id(cfg: RunConfiguration) -> str:
    return f"{slug(cfg.output.dir.name, 12)}-{secrets.token_hex(3)}"


def preflight(cfg: RunConfiguration, provider: SandboxProvider, console: Console, prepared: Prepared) -> Checked:
    """The checks of a run with instances to run, after `validate`: the models, the engine, the families."""
    for warning in probe_all(prepared.models):
        say(console, warning, style="yellow")
    image = provider.preflight(network=cfg.sandbox.network, log=lambda m: say(console, m))
    check_capacity(cfg.sandbox, provider.capacity(), prepared.selected)  # before any image is built
    named = wanted_images(prepared.selected)
    for name, (_, tasks) in named.items():  # every one first: a task whose base is missing is refused before any
        try:                                # image is built
            provider.check_image(name)
        except InputError as exc:
            if not name.startswith(ENGINE_IMAGE):  # a task's build context: its message names the task
                raise
            raise InputError(f"task {', '.join(tasks[:3])}{' ...' if len(tasks) > 3 else ''}: {exc}") from None
    images = {}
    for name, (seconds, _) in named.items():
        deadline = {"build_timeout": max(seconds)} if seconds else {}  # a task's own, for the build of its image
        images[name] = provider.image_of(name, log=lambda m: say(console, m), **deadline)
    checked = Checked(prepared, image, new_run_id(cfg), images)
    for warning in check_run(run_setup(cfg, provider, checked, cfg.output.dir, console, None)):
        say(console, warning, style="yellow")
    return checked


def wanted_images(selected: list[Instance]) -> dict[str, tuple[list[float], list[str]]]:
    """The images the instances' sandboxes (and their judges' own: a Harbor task's separate verifier) run from,
    sorted: name -> (the build timeouts they give, the instances naming it)."""
    found: dict[str, tuple[list[float], list[str]]] = {}
    for instance in selected:
        judge = instance.judge_sandbox
        for name, seconds in ((instance.image, instance.build_timeout),
                              (judge.image if judge else None, judge.build_timeout if judge else None)):
            if name:
                timeouts, tasks = found.setdefault(name, ([], []))
                timeouts.extend([seconds] if seconds else [])
                tasks.append(instance.instance_id)
    return dict(sorted(found.items()))


def run_setup(cfg: RunConfiguration, provider: SandboxProvider, checked: Checked, run_dir: Path, console: Console,
              network: str | None) -> RunSetup:
    """What the tool families' run-level steps read (`network`: the run's services', None: the policy's)."""
    selected = checked.prepared.selected
    return RunSetup(provider, SandboxSpec(image=checked.image, run_id=checked.run_id, instance_id="run",
                                          **cfg.sandbox.resources(network)),
                    selected[0] if selected else None, run_dir, cfg.search, cfg.mcp, cfg.sandbox.website,
                    bool(cfg.sandbox.web_record), tuple(cfg.sandbox.web_replay or ()), lambda m: say(console, m))
