"""Machine-wide locks for what tests in concurrent pytest processes (xdist workers, another
checkout's suite) must not do at the same time, e.g. `with machine_lock("disk"):`.

    subnet  choosing a free /24 and putting it on an interface (a second engine's veth pair)
    swarm   the host engine in a swarm (tests/helpers/swarm.py): one swarm at a time
    engine-NAME  a second engine of that name (tests/helpers/engines.py): its data root is one folder
    reap    the host engine's orphans (`harness cleanup`, provider.cleanup() without a run id): a test that
            kills an owner to reap its orphans holds it from the kill to its own reap, every other
            machine-wide reap holds it around the call, so no test removes another's orphans first
    disk    writing gigabytes to the engines' disk (an image loaded into a second engine, the compose
            build) and measuring the host's free space against a sandbox's disk limit
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from filelock import FileLock


def machine_lock(name: str, timeout: float = 600) -> FileLock:
    """A lock file under the machine's temp dir; waiting longer than `timeout` raises filelock.Timeout."""
    return FileLock(str(Path(tempfile.gettempdir()) / f"harness-tests-{name}.lock"), timeout=timeout)
