"""The built-in agents' system message: the instance's benchmark's own (`Benchmark.system`: Gaia2 speaks of its
apps and the user, Harbor of its sandbox and tests), else the one for a task answered in text from its files."""

from __future__ import annotations

from harness import benchmark
from harness.datasets.model import Instance

DEFAULT = (  # {workdir}: the sandbox's working directory (Sandbox.workdir: /workspace, or a task image's own)
    "You solve tasks with tools that run inside a sandbox holding the task's files in {workdir}. "
    "Inspect files and compute answers with the tools instead of guessing. When you are done, reply "
    "with a short explanation and the final answer inside <solution></solution>."
)


def system_message(instance: Instance | None, workdir: str) -> str:
    own = benchmark.get(instance.benchmark).system if instance is not None else None
    return (own or DEFAULT).format(workdir=workdir)
