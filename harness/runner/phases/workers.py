"""Phase 5, workers: the instances still to run, run (runner/evaluate.py), with the warm pool of started
sandboxes when --warm-pool asks (closed before the run's services stop and before the leak audit). A
crash or Ctrl-C removes the run's sandboxes before it goes on up."""

from __future__ import annotations

import contextlib

from rich.console import Console

from harness.config import RunConfiguration
from harness.results.layout import RunDir
from harness.runner.agent_process.servers import ForkServers
from harness.runner.evaluate import Outcome, evaluate
from harness.runner.instance import RunSettings
from harness.runner.phases.preflight import Checked
from harness.runner.phases.resume import Todo
from harness.runner.phases.services import Services
from harness.runner.pool import WarmPool
from harness.sandbox.contract import SandboxProvider, SandboxSpec


def work(cfg: RunConfiguration, provider: SandboxProvider, checked: Checked, services: Services, todo: Todo,
         layout: RunDir, console: Console, forks: ForkServers) -> Outcome:
    prepared, warm = checked.prepared, cfg.sandbox.warm_pool
    with contextlib.ExitStack() as stack:
        pool = None
        if warm and todo:
            pool = stack.enter_context(WarmPool(provider, SandboxSpec(
                image=checked.image, run_id=checked.run_id, instance_id="warm",
                **cfg.sandbox.resources(services.network)), min(warm, len(todo)), total=len(todo)))
        settings = RunSettings.of(cfg, run_id=checked.run_id, image=checked.image, images=checked.images,
                                  model=prepared.section,
                                  provider=provider, scorers=prepared.scorers, network=services.network,
                                  replay=prepared.replay, pool=pool, prompt=prepared.prompt,
                                  dataset=prepared.dataset.fingerprint[:16], search=services.search, forks=forks)
        try:
            return evaluate(todo, settings, layout.output, cfg, console, len(prepared.selected) * cfg.epochs.count)
        except BaseException:  # Ctrl-C (a second one may have cut the removals short), or a crash
            provider.cleanup(run_id=checked.run_id)
            raise
