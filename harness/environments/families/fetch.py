"""fetch_url: a plain HTTP GET made inside the sandbox (harness/environments/fetch.py), under the browser's
leakage guard; offered wherever there is a file environment."""

from __future__ import annotations

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.families.browser import Browser
from harness.environments.family import Needs, Tool, ToolFamily
from harness.environments.fetch import FetchEnv


class Fetch(ToolFamily[None]):
    name, order = "fetch", 40
    needs = Needs(apt=("python3", "ca-certificates"))

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        if envs.file is None:
            return []
        web = envs.of(Browser)
        fetcher = FetchEnv(envs.file, guard=web.guard if web is not None else None)

        async def fetch_url(url: str) -> str:
            """Download a URL with a plain HTTP GET (no browser, no JavaScript) and show its first page
            as markdown: the quick way to read a static page, a PDF or a data file. The file is saved in
            /workspace/fetched; read_file shows its other pages."""
            return await envs.call(fetcher.fetch, url)

        return [fetch_url]
