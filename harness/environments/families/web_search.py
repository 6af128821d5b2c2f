"""web_search, when the run has a search provider (the run's search settings; harness/environments/websearch/).
It runs in the agent's process on the host (a keyed provider's search a paid call of the agent's meter); a refused
key or an outage stops the instance (Environments.on_fatal). Its run-level steps: the preflight asks a hosted
provider once (websearch/probe.py), and before the first instance the `site` provider's offline website is crawled
and indexed, once (websearch/site.py), or a --web-replay run's recorded index is taken."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.family import RunSetup, Setup, Tool, ToolFamily
from harness.environments.websearch.probe import probe_search
from harness.environments.websearch.site import index_site
from harness.sandbox.site import site_info
from harness.web.recorded import SITE_INDEX, recorded_site_index, web_archives
from harness.web.search_archive import SEARCH_ARCHIVE

if TYPE_CHECKING:  # imported where used: the environment pulls in the HTTP client, and most runs search nothing
    from harness.environments.websearch.env import WebSearch
    from harness.models.meter import Meter


class WebSearchFamily(ToolFamily["WebSearch"]):
    name, order = "web_search", 70

    def offered(self, setup: Setup) -> bool:
        return setup.search is not None and setup.search.offered

    def build(self, setup: Setup, envs: Environments) -> WebSearch:
        from harness.environments.websearch.env import WebSearch

        assert setup.search is not None, "offered only with search settings"
        return WebSearch(setup.search, setup.tracer, who=setup.who)

    def metered(self, env: WebSearch, meter: Meter) -> None:
        env.meter = meter  # a keyed provider's search is a paid call of the instance

    def check(self, run: RunSetup) -> str | None:
        return None if run.web_replay else probe_search(run.search)  # a replay asks no provider

    def start(self, run: RunSetup, stack: contextlib.ExitStack) -> RunSetup:
        """The agents' search settings: the cache folder, and for `site` the offline website crawled and
        indexed now, before the first instance. A --web-record run indexes into web/ (beside its archive)
        and records the provider's exchanges in web/search.warc.gz; a --web-replay run searches the
        recorded index or archives, never live."""
        index = None
        if run.search.provider == "site" and run.website is not None:
            alias = site_info(run.website)[0]
            index = run.run_dir / ("web" if run.web_record else "") / SITE_INDEX
            spec = run.spec.model_copy(update={"instance_id": "site-crawl"})
            pages, passages, withheld = index_site(run.provider, spec, alias, index, run.search.block)
            held = f"; {withheld} URL(s) withheld by the leakage guard" if withheld else ""
            run.log(f"site search: {pages} page(s) of {alias} indexed ({passages} passages{held})")
        elif run.search.provider == "site" and run.web_replay:
            index = next(i for folder in run.web_replay if (i := recorded_site_index(folder)) is not None)
            run.log(f"site search: the recorded index {index}")
        search = run.search.for_run(run.run_dir, index,
                                    web_record=run.run_dir / "web" / SEARCH_ARCHIVE if run.web_record else None,
                                    web_replay=tuple(a for folder in run.web_replay for a in web_archives(folder)))
        return replace(run, search=search)

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        search = envs.of(WebSearchFamily)
        if search is None:
            return []
        from harness.environments.websearch.env import SearchRefused

        async def web_search(query: str, max_results: int = search.settings.max_results) -> str:
            """Search the web; returns numbered results (title, url, date when known, snippet). Open a
            result with visit_url or fetch_url to read it. Use specific keywords; search again with other
            words when the results miss."""
            try:
                return await envs.call(search.search, query, max_results)
            except SearchRefused as exc:  # the key or quota: the run's configuration, not the model's to read
                if envs.on_fatal:
                    envs.on_fatal(exc)
                raise

        return [web_search]
