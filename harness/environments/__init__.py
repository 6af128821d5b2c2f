"""Environments handed to agents: code execution, files as markdown, a browser, pictures...

Each tool family (harness/environments/family.py, one module each in families/) builds its environment
into `Environments`; an agent reads one as `envs.of(Family)` (None: not offered to this instance), and
the sandbox's two basic ones as `envs.code` and `envs.file`. Some are also published as context
variables, so any agent or tool can reach the current instance's environments without plumbing:
`code_env.get()`, `file_env.get()`, `web_env.get()`. Tools of any framework call them through
`Environments.call` / `Environments.guard`, the one place where a dead sandbox stops the instance
instead of reaching the model as ordinary tool output.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from harness.environments.code import CodeEnv, format_result
from harness.environments.files import FileEnv
from harness.environments.images import ImageEnv
from harness.environments.web import WebEnv
from harness.errors import InfraError

if TYPE_CHECKING:
    from harness.environments.family import ToolFamily

code_env: ContextVar[CodeEnv] = ContextVar("code_env")
file_env: ContextVar[FileEnv] = ContextVar("file_env")
web_env: ContextVar[WebEnv] = ContextVar("web_env")

T = TypeVar("T")
E = TypeVar("E")


@dataclass
class Environments:
    # each built family's environment, by the family's name (environments/family.py `environments`)
    built: dict[str, Any] = field(default_factory=dict)
    # Called with an InfraError (sandbox died or unreachable): the instance cannot go on,
    # and the failure must not reach the model as ordinary tool output.
    on_fatal: Callable[[BaseException], None] | None = None

    def of(self, family: type[ToolFamily[E]]) -> E | None:
        return self.built.get(family.name)

    @property
    def code(self) -> CodeEnv:
        return self.built["code"]

    @property
    def file(self) -> FileEnv:
        return self.built.get("files")  # type: ignore[return-value]  # None only where a test builds no files

    def publish(self) -> None:
        from harness.environments.families import families

        for family in families():
            if family.context is not None and family.name in self.built:
                family.context.set(self.built[family.name])

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
