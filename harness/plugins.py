"""Load a user's plug-in by `package.module:attribute` (agents, runners, providers, user functions).

One loader, so every flag that takes `module:attr` behaves alike: the working directory is
importable (as with `python -m`, and as in the agent's own process, so the installed
`harness` script finds a user's modules too), and a failure is an InputError naming the flag.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from harness.errors import InputError


def load(target: str, flag: str) -> Any:
    """Import `package.module:attr`; InputError naming the flag when it cannot be."""
    if ":" not in target:
        raise InputError(f"{flag} {target}: expected module:attribute")
    module_name, _, attr = target.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"{flag} {target}: cannot import it: {exc}") from None
