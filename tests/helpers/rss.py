"""The peak resident memory (VmHWM, from /proc) of the processes below a running one: a run's agents."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path


def descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, parent in parents.items() if parent == pid]
        found += children
        frontier += children
    return found


def hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_below(proc: subprocess.Popen, seconds: float) -> int:
    """Watch `proc` until it ends (killed after `seconds`): the highest VmHWM (KiB) any process below it had."""
    peak, deadline = 0, time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        peak = max([peak, *(hwm_kib(pid) for pid in descendants(proc.pid))])
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
    return peak


def run_watched(*args: object, log: Path, seconds: float = 400) -> int:
    """`harness ARGS` run to its end (its stdout in `log`), asserted exit 0: the peak VmHWM (KiB) below it."""
    from tests.helpers.e2e import start

    with log.open("w") as out:
        proc = start(*args, stdout=out)
        peak = peak_below(proc, seconds)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{log.read_text()[-2000:]}\n{stderr[-3000:]}"
    return peak
