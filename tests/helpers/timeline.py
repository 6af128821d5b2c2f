"""Where a suite run's time went: each test's start and end, per pytest-xdist worker.

    HARNESS_TEST_TIMELINE=/tmp/tl.jsonl bash scripts/test.sh     # each worker appends one line a test
    .venv/bin/python -m tests.helpers.timeline /tmp/tl.jsonl     # busy time per worker and per group,
                                                                 # the files that cost most
A line is {"worker", "test", "start", "end"} (wall-clock seconds); tests/conftest.py writes them.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from pathlib import Path

_started: dict[str, float] = {}


def started(nodeid: str) -> None:
    _started[nodeid] = time.time()


def finished(nodeid: str) -> None:
    target = os.environ.get("HARNESS_TEST_TIMELINE")
    if not target or nodeid not in _started:
        return
    line = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "test": nodeid,
            "start": _started.pop(nodeid), "end": time.time()}
    with open(target, "a") as fh:  # one short append a test: whole lines, whichever worker writes
        fh.write(json.dumps(line) + "\n")


def summary(path: Path, top: int = 25) -> str:
    from tests.conftest import serial_group

    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if any(x["worker"] != "main" for x in lines):  # an xdist run: "main" lines are a test's own pytest's
        lines = [x for x in lines if x["worker"] != "main"]
    if not lines:
        return f"{path}: no tests"
    begin, end = min(x["start"] for x in lines), max(x["end"] for x in lines)
    busy: collections.Counter[str] = collections.Counter()
    groups: dict[str, list[float]] = {}
    files: collections.Counter[str] = collections.Counter()
    for x in lines:
        took = x["end"] - x["start"]
        busy[x["worker"]] += took
        files[x["test"].split("::")[0]] += took
        group = serial_group(x["test"])
        if group:
            span = groups.setdefault(group, [x["start"], x["end"], 0.0])
            span[0], span[1], span[2] = min(span[0], x["start"]), max(span[1], x["end"]), span[2] + took
    out = [f"{len(lines)} tests, {end - begin:.0f} s from the first start to the last end, "
           f"{sum(busy.values()):.0f} s of tests in all"]
    out += [f"  worker {w}: busy {s:.0f} s" for w, s in sorted(busy.items())]
    out += [f"  group {g}: {s[2]:.0f} s of tests, from +{s[0] - begin:.0f} s to +{s[1] - begin:.0f} s"
            for g, s in sorted(groups.items(), key=lambda kv: -kv[1][2])]
    out += [f"  {s:7.0f} s  {f}" for f, s in files.most_common(top)]
    return "\n".join(out)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1])))
