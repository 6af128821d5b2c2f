"""Resolve `--agent NAME` to a runner: a built-in name, or `package.module:attr`.

`attr` may be an AgentRunner subclass (any framework, or none), or, as before, an
AutoGen factory `factory(model_client, envs, instance, limits)` returning an agent or
team, which the AutoGen runner drives. Built-ins name their runner explicitly.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from harness.agents.contract import AgentRunner
from harness.errors import InputError

AUTOGEN_RUNNER = "harness.agents.autogen.runner:AutoGenRunner"
BUILTIN = {  # name -> (runner, target)
    "assistant": (AUTOGEN_RUNNER, "harness.agents.autogen.builtin:assistant"),
    "roundrobin": (AUTOGEN_RUNNER, "harness.agents.autogen.builtin:roundrobin"),
    "magentic": (AUTOGEN_RUNNER, "harness.agents.autogen.builtin:magentic"),
    "websurfer": (AUTOGEN_RUNNER, "harness.agents.autogen.builtin:websurfer"),
    "plain": ("harness.agents.plain.runner:PlainRunner", None),
}


def load(target: str, flag: str = "--agent") -> Any:
    """Import `package.module:attr`; InputError naming the flag when it cannot be."""
    if ":" not in target:
        raise InputError(f"{flag} {target}: expected module:attribute")
    module_name, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"{flag} {target}: cannot import it: {exc}") from None


def resolve(name: str) -> Callable[[], AgentRunner]:
    """A maker of fresh runners for the agent `name` (checked here: import errors are input errors)."""
    if name in BUILTIN:
        runner_path, target_path = BUILTIN[name]
        runner_cls, target = load(runner_path), load(target_path) if target_path else None
    elif ":" in name:
        found = load(name)
        if isinstance(found, type) and issubclass(found, AgentRunner):
            runner_cls, target = found, None
        elif callable(found):
            runner_cls, target = load(AUTOGEN_RUNNER), found
        else:
            raise InputError(f"--agent {name}: not callable")
    else:
        raise InputError(f"--agent {name}: not a built-in agent ({', '.join(BUILTIN)}) nor module:attribute")
    return lambda: runner_cls(target)
