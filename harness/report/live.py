"""What a run is doing now, read from its directory without disturbing it (for `harness view`).

Rules:
* A run is live while a run or rescore holds DIR/.harness.lock. The lock is an flock; on Linux
  /proc/locks lists it, and it is read there, never taken (a viewer that took it, even for an
  instant, could make a starting run refuse the directory). `is_live` is None where it cannot be
  told (no /proc/locks): in-flight traces are then listed, and the page says the state is unknown.
* An instance is in flight when, for one of its epochs, its most recently written trace
  (traces/<slug>-<digest>[-eN]-aN.jsonl, RunDir.trace_name) was written since the current run
  started (run.json is rewritten at every start) and does not yet end with the parent's
  `verdict` event, which the runner appends to every finished instance's trace before its row.
  Traces are flushed as written, so an in-flight trace can be read while it grows.
* A run that is not live (is_live False) has nothing in flight: a trace a killed run left without a verdict is
  unfinished work, not a running instance.
* `progress`, accuracy so far, is over the finished instances with a verdict (an errored one is
  finished, a failure), overall and per level (the report's level, load.RunFigures.levels), beside
  how many of the selected finished, run or have no verdict: unfinished (missing or running)
  instances are in no denominator, so unfinished work is never counted as failed. Its interval
  is stats.wilson_interval's (None when the headline's values are graded).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from harness.report.stats import wilson_interval
from harness.results.layout import RunDir

_TRACE = re.compile(r"^(?P<prefix>.*?)(?:-e(?P<epoch>\d+))?-a(?P<attempt>\d+)\.jsonl$")
_TAIL = 1 << 16  # bytes read from a trace's end to find its last event


@dataclass(frozen=True)
class InFlight:
    instance_id: str
    epoch: int
    attempt: int
    trace: str  # relative to the run directory
    seconds: float = 0.0  # since the trace was last written


def is_live(root: Path, locks: Path = Path("/proc/locks")) -> bool | None:
    """True while some process holds DIR/.harness.lock, False when none does, None when unknown."""
    try:
        st = os.stat(RunDir(Path(root)).lock)
    except OSError:
        return False  # a run creates the lock file before it writes anything
    try:
        text = locks.read_text()
    except OSError:
        return None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in text.splitlines():
        parts = line.split()
        if "FLOCK" in parts and wanted in parts:
            return True
    return False


def _last_event_type(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL))
            tail = fh.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a torn last line is being written
        return event.get("type") if isinstance(event, dict) else None
    return None


class Watcher:
    """In-flight instances of one run directory; remembers each trace's last event type by its
    size and mtime, so a poll re-reads only the traces that changed."""

    def __init__(self, root: Path):
        self.layout = RunDir(Path(root))
        self._prefixes: dict[str, str] = {}  # trace name prefix -> instance id
        self._learned: set[str] = set()
        self._seen: dict[str, tuple[int, int, str | None]] = {}

    def _learn(self, ids: list[str]) -> None:
        for iid in set(ids) - self._learned:
            self._learned.add(iid)
            self._prefixes[self.layout.trace_name(iid, 0).removeprefix("traces/").removesuffix("-a0.jsonl")] = iid

    def in_flight(self, ids: list[str], live: bool | None) -> list[InFlight]:
        """The (id, epoch)s of `ids` being run now, in id order; none when the run is not live."""
        if live is False:
            return []
        try:
            since = os.stat(self.layout.run_json).st_mtime_ns
            entries = list(os.scandir(self.layout.traces))
        except OSError:
            return []
        self._learn(ids)
        newest: dict[tuple[str, int], tuple[int, os.DirEntry, int]] = {}
        for entry in entries:
            match = _TRACE.match(entry.name)
            if match is None:
                continue
            prefix, epoch = match["prefix"], int(match["epoch"] or 1)
            iid = self._prefixes.get(prefix)
            if iid is None and match["epoch"]:  # the id's own slug ends in "-eN"
                iid, epoch = self._prefixes.get(f"{prefix}-e{match['epoch']}"), 1
            if iid is None:
                continue
            try:
                st = entry.stat()
            except OSError:
                continue
            if st.st_mtime_ns >= since and st.st_mtime_ns >= newest.get((iid, epoch), (0,))[0]:
                newest[iid, epoch] = (st.st_mtime_ns, entry, int(match["attempt"]))
        order = {iid: k for k, iid in enumerate(ids)}
        out, now = [], time.time_ns()
        ordered = sorted(newest.items(), key=lambda kv: (order.get(kv[0][0], 0), kv[0][1]))
        for (iid, epoch), (mtime, entry, attempt) in ordered:
            st = entry.stat()
            cached = self._seen.get(entry.path)
            if cached and cached[:2] == (st.st_size, st.st_mtime_ns):
                last = cached[2]
            else:
                last = _last_event_type(Path(entry.path))
                self._seen[entry.path] = (st.st_size, st.st_mtime_ns, last)
            if last == "verdict":
                continue
            out.append(InFlight(iid, epoch, attempt, f"traces/{entry.name}", seconds=max(0.0, (now - mtime) / 1e9)))
        return out


def progress(verdicts: dict[str, tuple[str, float, bool]], running: set[str], levels: dict[str, str]) -> dict:
    """Accuracy so far (the module docstring): `verdicts` as build.headline_verdicts gives them,
    `levels` each id's level key."""
    zero = {"n_selected": 0, "n_finished": 0, "n_running": 0, "n_no_verdict": 0, "n_unscored": 0, "n_judged": 0,
            "n_correct": 0, "value": 0.0, "binary": True}
    buckets: dict[str, dict] = {}
    total = dict(zero)
    for iid, (outcome, value, passed) in verdicts.items():
        b = buckets.setdefault(levels.get(iid, "unknown"), dict(zero))
        for acc in (total, b):
            acc["n_selected"] += 1
            if iid in running:
                acc["n_running"] += 1
            elif outcome != "missing":
                acc["n_finished"] += 1
                if outcome in ("no_verdict", "unscored"):
                    acc[f"n_{outcome}"] += 1
                else:
                    acc["n_judged"] += 1
                    acc["n_correct"] += passed
                    acc["value"] += value
                    acc["binary"] = acc["binary"] and value in (0.0, 1.0)

    def finish(acc: dict) -> dict:
        n, binary = acc["n_judged"], acc.pop("binary")
        acc["accuracy"] = acc.pop("value") / n if n else None
        acc["ci95"] = list(wilson_interval(acc["n_correct"], n)) if binary else None
        return acc

    out = finish(total)
    out["per_level"] = {k: finish(b) for k, b in sorted(buckets.items(), key=lambda kv: (kv[0] == "unknown", kv[0]))}
    return out
