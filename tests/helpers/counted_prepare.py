"""The harness CLI with the Docker provider's `prepare` counted (tests/test_bookkeeping.py):
    python -m tests.helpers.counted_prepare MARK ARGS...
runs `harness ARGS` in this process, appending one line to the file MARK each time the run calls
the provider's `prepare` (the sandboxes' network and firewall)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from harness.sandbox.docker.provider import DockerProvider

mark = Path(sys.argv.pop(1))
real = DockerProvider.prepare


def counted(self, **kwargs):
    with open(mark, "a") as fh:
        fh.write(f"{kwargs.get('network')}\n")
    return real(self, **kwargs)


DockerProvider.prepare = counted  # type: ignore[method-assign]
sys.argv[0] = "harness"
runpy.run_module("harness", run_name="__main__")
