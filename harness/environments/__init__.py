"""Environments handed to agents: code execution, files as markdown, a browser, pictures.

They are also published as context variables, so any agent or tool can reach the
current instance's environments without plumbing: `code_env.get()`, `file_env.get()`,
`web_env.get()`. Tools of any framework call them through `Environments.call` /
`Environments.guard`, the one place where a dead sandbox stops the instance instead
of reaching the model as ordinary tool output.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from harness.environments.audio import AudioEnv
from harness.environments.code import CodeEnv, format_result
from harness.environments.files import FileEnv
from harness.environments.images import ImageEnv
from harness.environments.web import WebEnv
from harness.errors import InfraError

if TYPE_CHECKING:
    from harness.environments.websearch.env import WebSearch

code_env: ContextVar[CodeEnv] = ContextVar("code_env")
file_env: ContextVar[FileEnv] = ContextVar("file_env")
web_env: ContextVar[WebEnv] = ContextVar("web_env")

T = TypeVar("T")


@dataclass
class Environments:
    code: CodeEnv
    file: FileEnv
    web: WebEnv | None = None
    # Pictures for a vision model (harness/environments/images.py); None: the model sees text only.
    images: ImageEnv | None = None
    # Called with an InfraError (sandbox died or unreachable): the instance cannot go on,
    # and the failure must not reach the model as ordinary tool output.
    on_fatal: Callable[[BaseException], None] | None = None
    # transcribe_audio's provider (environments/audio.py): None, the model section names no transcription_model
    audio: AudioEnv | None = None
    # web_search's provider (environments/websearch/): None, the run searches nothing (--search none)
    search: WebSearch | None = None
    # the tools of the run's MCP servers, once connected (environments/mcp_tools.py `serving_mcp`)
    mcp: list[Callable[..., Awaitable[str]]] = field(default_factory=list)

    def publish(self) -> None:
        code_env.set(self.code)
        file_env.set(self.file)
        if self.web is not None:
            web_env.set(self.web)

    async def guard(self, awaitable: Awaitable[T]) -> T:
        """Await an environment action; a dead sandbox goes to on_fatal, not to the model."""
        try:
            return await awaitable
        except InfraError as exc:
            if self.on_fatal:
                self.on_fatal(exc)
            raise

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking environment action in a thread, guarded."""
        return await self.guard(asyncio.to_thread(fn, *args))


__all__ = ["CodeEnv", "FileEnv", "ImageEnv", "WebEnv", "Environments", "code_env", "file_env", "format_result",
           "web_env"]
