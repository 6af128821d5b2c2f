"""Resolve `--agent NAME` to a runner: a built-in name, or `package.module:attr`.

`attr` may be an AgentRunner subclass (any framework, or none), or, as before, an
AutoGen factory `factory(model_client, envs, instance, limits)` returning an agent or
team, which the AutoGen runner drives. Built-ins name their runner explicitly.
"""

from __future__ import annotations

from typing import Callable

from harness.agents.contract import AgentRunner
from harness.errors import InputError
from harness.plugins import load

AUTOGEN_RUNNER = "harness.agents.autogen.runner:AutoGenRunner"
BUILTIN = {  # name -> (runner, target)
    "assistant": (AUTOGEN_RUNNER, "harness.agents.autogen.builtin:assistant"),
    "roundrobin": (AUTOGEN_RUNNER, "harness.agents.autogen.builtin:roundrobin"),
    "magentic": (AUTOGEN_RUNNER, "harness.agents.autogen.builtin:magentic"),
    "websurfer": (AUTOGEN_RUNNER, "harness.agents.autogen.builtin:websurfer"),
    "plain": ("harness.agents.plain.runner:PlainRunner", None),
}


def resolve(name: str) -> Callable[[], AgentRunner]:
    """A maker of fresh runners for the agent `name` (checked here: import errors are input errors)."""
    if name in BUILTIN:
        runner_path, target_path = BUILTIN[name]
        runner_cls = load(runner_path, "--agent")
        target = load(target_path, "--agent") if target_path else None
    elif ":" in name:
        found = load(name, "--agent")
        if isinstance(found, type) and issubclass(found, AgentRunner):
            runner_cls, target = found, None
        elif callable(found):
            runner_cls, target = load(AUTOGEN_RUNNER, "--agent"), found
        else:
            raise InputError(f"--agent {name}: not callable")
    else:
        raise InputError(f"--agent {name}: not a built-in agent ({', '.join(BUILTIN)}) nor module:attribute")
    return lambda: runner_cls(target)
