"""An AutoGen code executor that runs code blocks inside the instance's sandbox (never the host)."""

from __future__ import annotations

from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock, CodeExecutor, CodeResult

from harness.environments import Environments
from harness.environments.code import format_result

PYTHON = {"python", "python3", "py"}
SHELL = {"sh", "bash", "shell"}
LANGUAGES = ["python", "python3", "py", "sh", "bash", "shell"]


class SandboxCodeExecutor(CodeExecutor):
    """Runs ```python blocks with `envs.code.run_python` and ```sh/bash/shell blocks with
    `envs.code.run_shell`, in order, stopping at the first block that fails (like AutoGen's
    command-line executors). Every run is traced by the code environment."""

    def __init__(self, envs: Environments):
        self._envs = envs

    async def execute_code_blocks(self, code_blocks: list[CodeBlock],
                                  cancellation_token: CancellationToken) -> CodeResult:
        outputs: list[str] = []
        exit_code = 0
        for block in code_blocks:
            language = (block.language or "").strip().lower()
            if language in PYTHON:
                result = await self._envs.call(self._envs.code.run_python, block.code)
            elif language in SHELL:
                result = await self._envs.call(self._envs.code.run_shell, block.code)
            else:
                outputs.append(f"unsupported language {block.language!r}: only python and sh/bash code "
                               "blocks can be run")
                exit_code = 1
                break
            outputs.append(format_result(result))
            exit_code = result.exit_code
            if result.timed_out and exit_code == 0:
                exit_code = 124
            if exit_code != 0:
                break
        return CodeResult(exit_code=exit_code, output="\n\n".join(outputs))

    async def start(self) -> None:
        """The sandbox is started (and stopped) by the harness."""

    async def stop(self) -> None:
        """The sandbox is stopped by the harness."""

    async def restart(self) -> None:
        """Each block runs in a fresh interpreter or shell: there is no session state to reset."""

    def _to_config(self):
        raise NotImplementedError("SandboxCodeExecutor is bound to a live sandbox and cannot be serialized")
