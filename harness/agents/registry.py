"""Resolve `--agent NAME` to a runner: a built-in name, `sandbox:COMMAND` (an agent program run inside
the sandbox, harness/agents/sandboxed/), or `package.module:attr`.

`attr` may be an AgentRunner subclass (any framework, or none), or, as before, an
AutoGen factory `factory(model_client, envs, instance, limits)` returning an agent or
team, which the AutoGen runner drives. Built-ins name their runner explicitly.

Checked at load, before any container (InputError, exit 2): a runner class must be
concrete, take the target as its one argument, and define `setup` and `turn` as
coroutines; a factory must take the four arguments above. What the factory returns is
checked by the runner's own preflight (a dry construction, AgentRunner.preflight).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

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
    "oracle": ("harness.agents.oracle.runner:OracleRunner", None),  # each instance's own reference actions
    "nop": ("harness.agents.nop.runner:NopRunner", None),  # does nothing, as Harbor's nop
}
NO_MODEL = ("oracle", "nop")  # the built-ins that call no model: --model may be left out
SANDBOXED = "sandbox:"  # --agent sandbox:COMMAND, a program run inside the sandbox (harness/agents/sandboxed/)


FACTORY = "factory(model_client, envs, instance, limits)"


def resolve(name: str) -> Callable[[], AgentRunner]:
    """A maker of fresh runners for the agent `name` (checked here: import errors are input errors)."""
    runner_cls, target = load_runner(name)
    return lambda: runner_cls(target)


def preload(name: str) -> tuple[str, ...]:
    """The modules agent `name`'s runner declares for its processes (`AgentRunner.preload`); the
    agents' fork server imports them once per run."""
    return load_runner(name)[0].preload


def load_runner(name: str) -> tuple[type[AgentRunner], Any]:
    """(runner class, target) for the agent `name`, checked as the module docstring says."""
    if name.startswith(SANDBOXED):
        from harness.agents.sandboxed.runner import SandboxedRunner, command

        return SandboxedRunner, command(name)
    if name in BUILTIN:
        runner_path, target_path = BUILTIN[name]
        runner_cls = load(runner_path, "--agent")
        target = load(target_path, "--agent") if target_path else None
    elif ":" in name:
        found = load(name, "--agent")
        if isinstance(found, type) and issubclass(found, AgentRunner):
            runner_cls, target = _checked_runner(name, found), None
        elif callable(found):
            runner_cls, target = load(AUTOGEN_RUNNER, "--agent"), _checked_factory(name, found)
        else:
            raise InputError(f"--agent {name}: not callable (expected an AgentRunner subclass or {FACTORY})")
    else:
        close = difflib.get_close_matches(name, BUILTIN, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise InputError(f"--agent {name}: not a built-in agent ({', '.join(BUILTIN)}) nor module:attribute{hint}")
    return runner_cls, target


def _checked_runner(name: str, cls: type[AgentRunner]) -> type[AgentRunner]:
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise InputError(f"--agent {name}: the AgentRunner subclass does not define {missing}")
    for method in ("setup", "turn"):
        if not inspect.iscoroutinefunction(getattr(cls, method)):
            raise InputError(f"--agent {name}: {cls.__name__}.{method} must be a coroutine (async def {method})")
    if not _takes(cls, 1):
        raise InputError(f"--agent {name}: {cls.__name__}(target) must be callable with the target alone "
                         f"(it takes {_signature(cls)})")
    return cls


def _checked_factory(name: str, factory: Callable) -> Callable:
    if not _takes(factory, 4):
        raise InputError(f"--agent {name}: an AutoGen agent factory is called as {FACTORY}; "
                         f"this one takes {_signature(factory)}")
    return factory


def _takes(fn: Callable, count: int) -> bool:
    """Whether fn can be called with `count` positional arguments (True when Python cannot tell)."""
    try:
        inspect.signature(fn).bind(*range(count))
    except TypeError:
        return False
    except ValueError:  # no signature (some builtins): the call itself will tell
        return True
    return True


def _signature(fn: Callable) -> str:
    try:
        return str(inspect.signature(fn))
    except ValueError:
        return "an unknown signature"
