"""run_python and run_shell, in the sandbox (harness/environments/code.py); always offered."""

from __future__ import annotations

from harness.datasets.model import Instance
from harness.environments import CodeEnv, Environments, code_env, format_result
from harness.environments.family import Needs, Setup, Tool, ToolFamily


class Code(ToolFamily[CodeEnv]):
    name, order, context = "code", 10, code_env
    needs = Needs(apt=("python3", "bash", "procps", "coreutils"),
                  pip=("pandas", "numpy", "openpyxl", "pypdf", "python-docx", "python-pptx", "markitdown"))

    def build(self, setup: Setup, envs: Environments) -> CodeEnv:
        return CodeEnv(setup.sandbox, setup.tracer, timeout=setup.command_timeout)

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        async def run_python(code: str) -> str:
            return format_result(await envs.call(envs.code.run_python, code))

        async def run_shell(command: str) -> str:
            return format_result(await envs.call(envs.code.run_shell, command))

        # the sandbox's working directory: /workspace, or a task image's own (e.g. a Harbor task's /app); a task's
        # own image (Instance.image a build context's path) has its libraries, not the toolbox's
        workdir = envs.code.sandbox.workdir
        own = instance is not None and (instance.image or "").startswith("/")
        run_python.__doc__ = (f"Run Python 3 code in the sandbox (working directory {workdir}"
                              + ("" if own else "; pandas, numpy, openpyxl, pypdf, python-docx, python-pptx, "
                                 "markitdown installed") + "). Print what you need to see.")
        run_shell.__doc__ = f"Run a bash command in the sandbox (working directory {workdir})."
        return [run_python, run_shell]
