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
from harness.environments.families import check_run
from harness.environments.family import RunSetup
from harness.fsutil import slug
from harness.models.probe import probe_all
from harness.runner.preflight import Prepared, check_capacity, prepare, unreachable_web, unseen_images, unserved_website
from harness.sandbox.contract import SandboxProvider, SandboxSpec
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
    named = sorted({instance.image for instance in prepared.selected if instance.image})
    for name in named:  # every one first: a task whose base is missing is refused before any image is built
        provider.check_image(name)
    images = {}
    for name in named:
        seconds = [i.build_timeout for i in prepared.selected if i.image == name and i.build_timeout]
        deadline = {"build_timeout": max(seconds)} if seconds else {}  # a task's own, for the build of its image
        images[name] = provider.image_of(name, log=lambda m: say(console, m), **deadline)
    checked = Checked(prepared, image, new_run_id(cfg), images)
    for warning in check_run(run_setup(cfg, provider, checked, cfg.output.dir, console, None)):
        say(console, warning, style="yellow")
    return checked


def run_setup(cfg: RunConfiguration, provider: SandboxProvider, checked: Checked, run_dir: Path, console: Console,
              network: str | None) -> RunSetup:
    """What the tool families' run-level steps read (`network`: the run's services', None: the policy's)."""
    selected = checked.prepared.selected
    return RunSetup(provider, SandboxSpec(image=checked.image, run_id=checked.run_id, instance_id="run",
                                          **cfg.sandbox.resources(network)),
                    selected[0] if selected else None, run_dir, cfg.search, cfg.mcp, cfg.sandbox.website,
                    bool(cfg.sandbox.web_record), tuple(cfg.sandbox.web_replay or ()), lambda m: say(console, m))
