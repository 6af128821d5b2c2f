"""The browser's tools (harness/environments/web.py): Chromium runs inside the sandbox and starts on first
use; closed after the agent's turns. The run's leakage guard (its search settings' block list) holds for it
with or without a search tool, and for fetch_url's downloads too (families/fetch.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from harness.datasets.model import Instance
from harness.environments import Environments, WebEnv, web_env
from harness.environments.families.images import Images
from harness.environments.family import Needs, Setup, Tool, ToolFamily
from harness.environments.websearch.guard import Guard

T = TypeVar("T")


class Browser(ToolFamily[WebEnv]):
    name, order, kit, context = "browser", 10, "browser", web_env
    needs = Needs(apt=("chromium", "fonts-dejavu-core", "fonts-liberation"))

    def build(self, setup: Setup, envs: Environments) -> WebEnv:
        web = WebEnv(setup.sandbox, setup.tracer, screenshots=setup.shots, page_size=setup.page_size,
                     images=envs.of(Images))
        if setup.search is not None:
            web.guard = Guard(setup.search.block)
        return web

    async def serve(self, setup: Setup, env: WebEnv, envs: Environments, work: Callable[[], Awaitable[T]]) -> T:
        try:
            return await work()
        finally:
            await env.close()

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        web = envs.of(Browser)
        if web is None:
            return []

        async def visit_url(url: str) -> str:
            """Open a URL in the browser and show the first page of its text; links, buttons and inputs
            are marked [N] so you can click or type into them."""
            return await envs.guard(web.visit(url))

        async def read_page(page: int = 1) -> str:
            """Show page N of the current web page's text."""
            return await envs.guard(web.read_page(page))

        async def page_down() -> str:
            """Show the next page of the current web page's text."""
            return await envs.guard(web.page_down())

        async def page_up() -> str:
            """Show the previous page of the current web page's text."""
            return await envs.guard(web.page_up())

        async def find_on_page(text: str) -> str:
            """Find text on the current web page; returns pages and snippets."""
            return await envs.guard(web.find(text))

        async def click(target: str) -> str:
            """Click a link or button by its [N] reference or its visible text."""
            return await envs.guard(web.click(target))

        async def type_text(target: str, text: str, submit: bool = True) -> str:
            """Type into an input (by [N] reference or label) and, by default, press Enter."""
            return await envs.guard(web.type_text(target, text, submit))

        async def go_back() -> str:
            """Go back to the previous page."""
            return await envs.guard(web.back())

        async def download_file(target: str) -> str:
            """Download a URL, or the link with this [N] reference or text, into /workspace/downloads."""
            return await envs.guard(web.download(target))

        async def screenshot() -> str:
            """Take a screenshot of the current page (kept in the trace; shown to you when you can see images)."""
            return await envs.guard(web.screenshot())

        return [visit_url, read_page, page_down, page_up, find_on_page, click, type_text, go_back, download_file,
                screenshot]
