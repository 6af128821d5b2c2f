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
