"""The agent's tools over the instance's environments, as plain async functions.

Every runner offers these same functions: AutoGen wraps them as FunctionTools, the
plain runner sends `schema(fn)` to the model. Their docstrings are what the model
reads. All go through `Environments.call/guard`, so a dead sandbox stops the instance.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ConfigDict, create_model

from harness.datasets.model import Instance
from harness.environments import Environments, format_result
from harness.environments.search import SearchEnv

Tool = Callable[..., Awaitable[str]]


def sandbox_tools(envs: Environments, instance: Instance | None = None) -> list[Tool]:
    """The code and file tools, and `search_corpus` when the instance names a corpus (search_tools)."""
    async def run_python(code: str) -> str:
        """Run Python 3 code in the sandbox (working directory /workspace; pandas, numpy, openpyxl,
        pypdf, python-docx, python-pptx, markitdown installed). Print what you need to see."""
        return format_result(await envs.call(envs.code.run_python, code))

    async def run_shell(command: str) -> str:
        """Run a bash command in the sandbox (working directory /workspace)."""
        return format_result(await envs.call(envs.code.run_shell, command))

    async def list_files(path: str = ".") -> str:
        """List files under a folder of the workspace, with sizes."""
        return await envs.call(envs.file.list_files, path)

    async def read_file(path: str, page: int = 1) -> str:
        """Read a workspace file (pdf, docx, xlsx, pptx, csv, json, html, zip, text...) as markdown,
        one page at a time; the header says how many pages there are."""
        return await envs.call(envs.file.read, path, page)

    async def find_in_file(path: str, text: str) -> str:
        """Find text in a workspace file (converted to markdown); returns pages and snippets."""
        return await envs.call(envs.file.find, path, text)

    tools: list[Tool] = [run_python, run_shell, list_files, read_file, find_in_file]
    return tools + search_tools(envs, instance)


def search_tools(envs: Environments, instance: Instance | None) -> list[Tool]:
    """`search_corpus` over the workspace file named by the instance's metadata["corpus"], if any."""
    corpus = (instance.metadata.get("corpus") if instance is not None else None) or None
    if not isinstance(corpus, str) or envs.code is None:
        return []
    search = SearchEnv(envs.code.sandbox, envs.code.tracer, corpus)

    async def search_corpus(query: str, top_k: int = 5) -> str:
        """Search the task's document corpus (news articles) with BM25 keyword search; returns the
        top_k best passages with their article's title, source, publication date and url. Use
        specific keywords (names, places, events); search again with other words for each fact."""
        return await envs.call(search.search, query, top_k)

    return [search_corpus]


def web_tools(envs: Environments) -> list[Tool]:
    """Browser tools; the browser runs inside the sandbox and starts on first use."""
    web = envs.web
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
        """Take a screenshot of the current page (kept in the trace)."""
        return await envs.guard(web.screenshot())

    return [visit_url, read_page, page_down, page_up, find_on_page, click, type_text, go_back, download_file,
            screenshot]


def description(fn: Tool) -> str:
    return " ".join((fn.__doc__ or fn.__name__).split())


def arguments_model(fn: Tool) -> type[BaseModel]:
    """A pydantic model of a tool's parameters (lax: "2" becomes 2; unknown arguments are refused)."""
    hints = typing.get_type_hints(fn)
    # (type, default) per parameter; Any: create_model takes the definitions as keyword arguments
    fields: dict[str, typing.Any] = {
        name: (hints.get(name, typing.Any), ... if p.default is inspect.Parameter.empty else p.default)
        for name, p in inspect.signature(fn).parameters.items()}
    return create_model(f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


def schema(fn: Tool) -> dict:
    """The OpenAI `tools` entry for a tool function (parameters from its signature)."""
    parameters = arguments_model(fn).model_json_schema()
    parameters.pop("title", None)
    for prop in parameters.get("properties", {}).values():
        prop.pop("title", None)
    return {"type": "function", "function": {"name": fn.__name__, "description": description(fn),
                                             "parameters": parameters}}
