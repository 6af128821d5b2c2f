"""The agent's tools over the instance's environments, as plain async functions.

Every runner offers these same functions: AutoGen wraps them as FunctionTools, the
plain runner sends `schema(fn)` to the model; a `SchemaTool` (an MCP server's tool) carries its
own JSON schema instead of a signature. Their docstrings are what the model
reads. All go through `Environments.call/guard`, so a dead sandbox stops the instance.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, create_model, model_validator

from harness.datasets.model import Instance
from harness.environments import Environments, format_result
from harness.environments.fetch import FetchEnv
from harness.environments.search import SearchEnv
from harness.environments.video import VideoEnv
from harness.environments.websearch.env import SearchRefused

Tool = Callable[..., Awaitable[str]]


class SchemaTool:
    """A tool that brings its own parameters' JSON schema (an MCP server's: environments/mcp_tools.py)
    instead of a signature: `schema` sends it as is, `arguments_model` checks calls against it."""

    def __init__(self, name: str, description: str, parameters: dict[str, Any],
                 call: Callable[[dict[str, Any]], Awaitable[str]]):
        self.__name__, self.__doc__, self.parameters, self._call = name, description, parameters, call

    async def __call__(self, **arguments: Any) -> str:
        return await self._call(arguments)


class _SchemaArguments(BaseModel):
    """Arguments checked against a SchemaTool's JSON schema (`validator`), passed on as given."""

    model_config = ConfigDict(extra="allow")
    validator: ClassVar[Any]

    @model_validator(mode="before")
    @classmethod
    def _against_schema(cls, data: Any) -> Any:
        problems = [f"{'.'.join(map(str, e.absolute_path)) or 'arguments'}: {e.message}"
                    for e in cls.validator.iter_errors(data)]
        if problems:
            raise ValueError("; ".join(problems))
        return data


def sandbox_tools(envs: Environments, instance: Instance | None = None) -> list[Tool]:
    """The code and file tools, `view_image` for a vision model (image_tools), `web_search` when the run
    has a search provider (web_search_tools), and `search_corpus` when the instance names a corpus
    (search_tools)."""
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
    return (tools + image_tools(envs) + media_tools(envs) + web_search_tools(envs) + search_tools(envs, instance)
            + mcp_tools(envs))


def mcp_tools(envs: Environments) -> list[Tool]:
    """The tools of the run's MCP servers (`SERVER__TOOL`), connected by environments/mcp_tools.py."""
    return list(envs.mcp)


def image_tools(envs: Environments) -> list[Tool]:
    """`view_image` when the model sees images (envs.images: harness/environments/images.py)."""
    images = envs.images
    if images is None:
        return []

    async def view_image(path: str) -> str:
        """Look at an image file of the workspace (png, jpg, gif, webp; a video frame, a chart, a scan):
        the picture is shown to you after this result, resized to at most 1568 pixels a side."""
        return await envs.call(images.view, path)

    return [view_image]


def media_tools(envs: Environments) -> list[Tool]:
    """`fetch_url` and `video_frames` (both in the sandbox), and `transcribe_audio` when the model
    section names a transcription model (envs.audio); none without a file environment."""
    if envs.file is None:
        return []
    fetcher = FetchEnv(envs.file, guard=envs.web.guard if envs.web is not None else None)  # the browser's guard
    video = VideoEnv(envs.file.sandbox, envs.file.tracer)

    async def fetch_url(url: str) -> str:
        """Download a URL with a plain HTTP GET (no browser, no JavaScript) and show its first page
        as markdown: the quick way to read a static page, a PDF or a data file. The file is saved in
        /workspace/fetched; read_file shows its other pages."""
        return await envs.call(fetcher.fetch, url)

    async def video_frames(path: str, every_s: float = 5.0) -> str:
        """Extract still frames from a workspace video, one every every_s seconds (at most 30); returns
        the frames' workspace paths and times, to look at with view_image."""
        return await envs.call(video.frames, path, every_s)

    tools: list[Tool] = [fetch_url, video_frames]
    audio = envs.audio
    if audio is not None:
        async def transcribe_audio(path: str) -> str:
            """Transcribe a workspace audio file (mp3, wav, m4a, ...; at most 25 MB) to text with a
            speech-to-text model; the transcript is saved in /workspace/transcripts."""
            return await envs.call(audio.transcribe, path)

        tools.append(transcribe_audio)
    return tools


def web_search_tools(envs: Environments) -> list[Tool]:
    """`web_search` when the run has a search provider (envs.search: environments/websearch/). It runs in
    the agent's process on the host; a refused key or an outage stops the instance (Environments.on_fatal)."""
    search = envs.search
    if search is None:
        return []

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
        """Take a screenshot of the current page (kept in the trace; shown to you when you can see images)."""
        return await envs.guard(web.screenshot())

    return [visit_url, read_page, page_down, page_up, find_on_page, click, type_text, go_back, download_file,
            screenshot]


def description(fn: Tool) -> str:
    return " ".join((fn.__doc__ or fn.__name__).split())


def arguments_model(fn: Tool) -> type[BaseModel]:
    """A pydantic model of a tool's parameters (lax: "2" becomes 2; unknown arguments are refused)."""
    if isinstance(fn, SchemaTool):
        import jsonschema

        validator = jsonschema.validators.validator_for(fn.parameters)(fn.parameters)
        return type(f"{fn.__name__}_arguments", (_SchemaArguments,), {"validator": validator})
    hints = typing.get_type_hints(fn)
    # (type, default) per parameter; Any: create_model takes the definitions as keyword arguments
    fields: dict[str, typing.Any] = {
        name: (hints.get(name, typing.Any), ... if p.default is inspect.Parameter.empty else p.default)
        for name, p in inspect.signature(fn).parameters.items()}
    return create_model(f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


def schema(fn: Tool) -> dict:
    """The OpenAI `tools` entry for a tool function (parameters from its signature, or its own: SchemaTool)."""
    if isinstance(fn, SchemaTool):
        return {"type": "function", "function": {"name": fn.__name__, "description": description(fn),
                                                 "parameters": fn.parameters}}
    parameters = arguments_model(fn).model_json_schema()
    parameters.pop("title", None)
    for prop in parameters.get("properties", {}).values():
        prop.pop("title", None)
    return {"type": "function", "function": {"name": fn.__name__, "description": description(fn),
                                             "parameters": parameters}}
