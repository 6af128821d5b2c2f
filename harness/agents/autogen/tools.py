"""AutoGen tools that act through the instance's environments (never the host)."""

from __future__ import annotations

import asyncio

from autogen_core.tools import FunctionTool

from harness.environments import Environments
from harness.environments.code import format_result
from harness.errors import InfraError


def sandbox_tools(envs: Environments) -> list[FunctionTool]:
    async def call(fn, *args):
        try:
            return await asyncio.to_thread(fn, *args)
        except InfraError as exc:
            if envs.on_fatal:
                envs.on_fatal(exc)
            raise

    async def run_python(code: str) -> str:
        """Run Python 3 code in the sandbox (working directory /workspace; pandas, numpy, openpyxl,
        pypdf, python-docx, python-pptx, markitdown installed). Print what you need to see."""
        return format_result(await call(envs.code.run_python, code))

    async def run_shell(command: str) -> str:
        """Run a bash command in the sandbox (working directory /workspace)."""
        return format_result(await call(envs.code.run_shell, command))

    async def list_files(path: str = ".") -> str:
        """List files under a folder of the workspace, with sizes."""
        return await call(envs.file.list_files, path)

    async def read_file(path: str, page: int = 1) -> str:
        """Read a workspace file (pdf, docx, xlsx, pptx, csv, json, html, zip, text...) as markdown,
        one page at a time; the header says how many pages there are."""
        return await call(envs.file.read, path, page)

    async def find_in_file(path: str, text: str) -> str:
        """Find text in a workspace file (converted to markdown); returns pages and snippets."""
        return await call(envs.file.find, path, text)

    return [FunctionTool(f, description=f.__doc__ or f.__name__)
            for f in (run_python, run_shell, list_files, read_file, find_in_file)]


def web_tools(envs: Environments) -> list[FunctionTool]:
    """Browser tools; the browser runs inside the sandbox and starts on first use."""
    web = envs.web

    async def guard(coro):
        try:
            return await coro
        except InfraError as exc:
            if envs.on_fatal:
                envs.on_fatal(exc)
            raise

    async def visit_url(url: str) -> str:
        """Open a URL in the browser and show the first page of its text; links, buttons and inputs
        are marked [N] so you can click or type into them."""
        return await guard(web.visit(url))

    async def read_page(page: int = 1) -> str:
        """Show page N of the current web page's text."""
        return await guard(web.read_page(page))

    async def page_down() -> str:
        """Show the next page of the current web page's text."""
        return await guard(web.page_down())

    async def page_up() -> str:
        """Show the previous page of the current web page's text."""
        return await guard(web.page_up())

    async def find_on_page(text: str) -> str:
        """Find text on the current web page; returns pages and snippets."""
        return await guard(web.find(text))

    async def click(target: str) -> str:
        """Click a link or button by its [N] reference or its visible text."""
        return await guard(web.click(target))

    async def type_text(target: str, text: str, submit: bool = True) -> str:
        """Type into an input (by [N] reference or label) and, by default, press Enter."""
        return await guard(web.type_text(target, text, submit))

    async def go_back() -> str:
        """Go back to the previous page."""
        return await guard(web.back())

    async def download_file(target: str) -> str:
        """Download a URL, or the link with this [N] reference or text, into /workspace/downloads."""
        return await guard(web.download(target))

    async def screenshot() -> str:
        """Take a screenshot of the current page (kept in the trace)."""
        return await guard(web.screenshot())

    return [FunctionTool(f, description=f.__doc__ or f.__name__)
            for f in (visit_url, read_page, page_down, page_up, find_on_page, click, type_text, go_back,
                      download_file, screenshot)]
