"""Resolve an agent name (built in) or `package.module:function` to its factory."""

from __future__ import annotations

import importlib
from typing import Callable

from harness.errors import InputError

BUILTIN = {
    "assistant": "harness.agents.autogen.builtin:assistant",
    "roundrobin": "harness.agents.autogen.builtin:roundrobin",
    "magentic": "harness.agents.autogen.builtin:magentic",
    "websurfer": "harness.agents.autogen.builtin:websurfer",
}


def resolve(name: str) -> Callable:
    target = BUILTIN.get(name, name)
    if ":" not in target:
        raise InputError(f"--agent {name}: not a built-in agent ({', '.join(BUILTIN)}) nor module:function")
    module_name, _, attr = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"--agent {name}: cannot import {target}: {exc}") from None
    if not callable(factory):
        raise InputError(f"--agent {name}: {target} is not callable")
    return factory
