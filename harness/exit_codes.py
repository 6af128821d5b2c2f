"""The exit codes of `harness run` (and the other commands), documented in docs/reference.md.

Rules: 0 only when every selected instance ended without an error and nothing was left
behind; a bad input never gets as far as a container; a signal ends the run the way the
shell reports it (128 + the signal's number).
"""

from __future__ import annotations

import signal

OK = 0
FAILED = 1  # the harness could not do its job: the engine, a bug, containers left behind
INPUT = 2  # the dataset, flags, config, output dir or model refused before any container (or, mid-run, a model
# reply that cannot be priced: harness/usage.py UsageMissing; the run starts no more instances)
# the run ended, but some selected instance errored, was not run (--fail-on-error) or got no verdict
INSTANCE_ERRORS = 3
ROWS_NOT_WRITTEN = 4  # the output dir stopped taking files mid-run (a full disk): the message says where every
# row is (those output.jsonl did not take rescued elsewhere)
DIVERGED = 5  # --fail-on-divergence: a replayed tool result differed from the recording's, or could not
# be checked against it (harness/models/replay.py)


def signalled(signum: int = signal.SIGINT) -> int:
    """The shell's code for a process ended by a signal: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + int(signum)
