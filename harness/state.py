"""Where the harness keeps its machine-local state (locks, port registry)."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """HARNESS_STATE_DIR, else ~/.cache/harness; created on first use."""
    path = Path(os.environ.get("HARNESS_STATE_DIR") or Path.home() / ".cache" / "harness")
    path.mkdir(parents=True, exist_ok=True)
    return path
