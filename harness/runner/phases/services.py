"""Phase 4, web services: what the run's sandboxes share while its instances run, started once before
the first and stopped after the last (only when something is left to run):

- the offline website (--website: the provider's `website`), whose network the sandboxes join;
- the web proxy (--web-record / --web-replay: the provider's `web_proxy`, sandbox/docker/webproxy.py);
- every tool family's run-level start (environments/family.py `start`: the site search's crawl and index),
  on the sandboxes' network, whose settings for the agents travel in `Services`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from harness.config import RunConfiguration
from harness.environments.families import start_run
from harness.environments.websearch.settings import SearchSettings
from harness.results.layout import RunDir
from harness.runner.phases.preflight import Checked, run_setup
from harness.sandbox.contract import SandboxProvider
from harness.sandbox.site import site_info
from harness.settings import settings as harness_settings
from harness.terminal import say
from harness.web.recorded import web_archives


@dataclass(frozen=True)
class Services:
    """What the workers get of the run's services: the sandboxes' network (the site's or the proxy's;
    None: the configured policy) and the agents' search settings."""

    network: str | None
    search: SearchSettings


@contextlib.contextmanager
def web_services(cfg: RunConfiguration, provider: SandboxProvider, checked: Checked, layout: RunDir,
                 console: Console) -> Iterator[Services]:
    """The run's services while the block runs (a run with nothing left to run starts none: run.py)."""
    with contextlib.ExitStack() as stack:
        network = None
        if cfg.sandbox.website is not None:
            network = stack.enter_context(provider.website(cfg.sandbox.website, checked.image, checked.run_id))
            say(console, f"website {site_info(cfg.sandbox.website)[0]} up ({network})")
        if cfg.sandbox.web_record or cfg.sandbox.web_replay:
            network = stack.enter_context(_web_proxy(cfg, provider, checked.run_id, network, layout, console))
        run = start_run(run_setup(cfg, provider, checked, layout.root, console, network), stack)
        yield Services(network, run.search)


@contextlib.contextmanager
def _web_proxy(cfg: RunConfiguration, provider: SandboxProvider, run_id: str, network: str | None, layout: RunDir,
               console: Console) -> Iterator[str]:
    """--web-record / --web-replay: the run's web proxy; yields the sandboxes' network policy (the site's
    when recording, the proxy's own internal network when replaying)."""
    upstream = harness_settings().web_upstream_ca
    options = {"upstream_ca": Path(upstream).read_bytes() if upstream else None, "log_": lambda m: say(console, m)}
    if cfg.sandbox.web_replay:
        archives = tuple(a for folder in cfg.sandbox.web_replay for a in web_archives(folder))
        with provider.web_proxy("replay", run_id, None, archives=archives, **options) as proxy:
            say(console, f"web replay: {len(archives)} archive(s) served, nothing live ({proxy.network})")
            yield f"internal:{proxy.network}"
        return
    out = layout.root / "web" / f"{run_id}.warc.gz"
    with provider.web_proxy("record", run_id, network, out=out, **options) as proxy:
        say(console, f"web record: every page the browsers load goes to {out}")
        yield network or f"internal:{proxy.network}"
