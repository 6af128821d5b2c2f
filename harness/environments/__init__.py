"""Environments handed to agents: code execution, files as markdown (and later a browser).

They are also published as context variables, so any agent or tool can reach the
current instance's environments without plumbing: `code_env.get()`, `file_env.get()`.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable

from harness.environments.code import CodeEnv
from harness.environments.files import FileEnv

code_env: ContextVar[CodeEnv] = ContextVar("code_env")
file_env: ContextVar[FileEnv] = ContextVar("file_env")
web_env: ContextVar[Any] = ContextVar("web_env")


@dataclass
class Environments:
    code: CodeEnv
    file: FileEnv
    web: Any = None
    # Called with an InfraError (sandbox died or unreachable): the instance cannot go on,
    # and the failure must not reach the model as ordinary tool output.
    on_fatal: Callable[[BaseException], None] | None = None

    def publish(self) -> None:
        code_env.set(self.code)
        file_env.set(self.file)
        if self.web is not None:
            web_env.set(self.web)


__all__ = ["CodeEnv", "FileEnv", "Environments", "code_env", "file_env", "web_env"]
