"""Phase 6, the leak audit: every container of this run (sandboxes, website, proxy) must be gone now."""

from __future__ import annotations

from rich.console import Console

from harness.sandbox.contract import SandboxProvider
from harness.terminal import say


def leak_audit(provider: SandboxProvider, run_id: str, console: Console) -> int:
    """How many of the run's containers are left. A removal that failed during the run (e.g. the engine
    was restarting) is tried once more; what still stands is leaked."""
    if not provider.find(run_id):
        return 0
    swept = provider.cleanup(run_id=run_id)
    say(console, f"removed {len(swept)} container(s) of this run whose removal had failed", style="yellow")
    return len(provider.find(run_id))
