"""ARE's own record of a Gaia2 run, kept beside the run's trace: the scenario as ARE's runner exports it once judged
(its JsonScenarioExporter, "hf" format: the scenario with its apps, its completed events and the verdict's decision),
the file ARE's leaderboard rows carry in their `data` column and `are-benchmark judge` re-judges offline.

The driver (images/gaia2/gaia2_driver.py `--trace`) writes it gzipped in the judge's sandbox when it judges the run
(`harness__finish`, after a kill too); the host copies it out before that sandbox goes (`Benchmark.record`, read by
runner/instance.py) to ``traces/<the trace's name>.are.json.gz``; the export reads it back (`read`). Bounded: at
most MAX_GZIP bytes copied, MAX_JSON bytes unpacked; a larger one is left out, with a warning."""

from __future__ import annotations

import gzip
import logging
import zlib
from pathlib import Path
from typing import Any

from harness.errors import SandboxFileNotFound, SandboxOutputLimit, SandboxRequestError

log = logging.getLogger(__name__)
TRACE = "/workspace/.are-trace.json.gz"  # where the driver writes it, in the judge's sandbox
SUFFIX = ".are.json.gz"  # beside the run's trace: its name with this instead of .jsonl
MAX_GZIP = 64 * 1024 * 1024
MAX_JSON = 512 * 1024 * 1024


def record(sandbox: Any) -> tuple[str, bytes] | None:
    """ARE's trace of the run judged in the judge's `sandbox` (gzipped), with the suffix of its file beside the run's
    trace; None: none was written (the driver never judged the run) or it is larger than MAX_GZIP."""
    try:
        return SUFFIX, sandbox.read_file(TRACE, max_bytes=MAX_GZIP)
    except SandboxFileNotFound:
        return None
    except SandboxOutputLimit:
        log.warning("ARE's trace of the run in %s is larger than %d bytes gzipped: not kept", sandbox.name, MAX_GZIP)
        return None
    except SandboxRequestError as exc:
        log.warning("ARE's trace of the run in %s could not be read: %s", sandbox.name, exc)
        return None


def beside(trace: str) -> str:
    """The record's path (relative to the run directory) of the run whose trace is `trace`."""
    return trace.removesuffix(".jsonl") + SUFFIX


def kept(root: Path, trace: str | None) -> bool:
    """Whether the run whose trace is `trace` has ARE's trace kept beside it."""
    return trace is not None and (root / beside(trace)).is_file()


def read(root: Path, trace: str | None) -> str | None:
    """ARE's trace of the run whose trace is `trace` under the run directory `root`, as ARE wrote it; None when
    it was not kept, or is unreadable or larger than MAX_JSON unpacked."""
    if trace is None:
        return None
    try:
        with gzip.open(root / beside(trace), "rb") as fh:
            data = fh.read(MAX_JSON + 1)
    except (OSError, EOFError, zlib.error):
        return None
    if len(data) > MAX_JSON:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
