"""list_files, read_file and find_in_file: the workspace's files as markdown (harness/environments/files.py)."""

from __future__ import annotations

from harness.datasets.model import Instance
from harness.environments import Environments, FileEnv, file_env
from harness.environments.family import Needs, Setup, Tool, ToolFamily


class Files(ToolFamily[FileEnv]):
    name, order, context = "files", 20, file_env
    needs = Needs(apt=("file", "unzip"), pip=("markitdown", "pdfminer.six"))

    def build(self, setup: Setup, envs: Environments) -> FileEnv:
        return FileEnv(setup.sandbox, setup.tracer, page_size=setup.page_size)

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
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

        return [list_files, read_file, find_in_file]
