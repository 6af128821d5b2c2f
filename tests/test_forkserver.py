"""Agent processes forked from the preloaded server: same isolation, limits and lifetime as fresh ones."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.e2e import REPO, explain, harness, rows

pytestmark = pytest.mark.docker


def dataset(tmp_path: Path, ids: list[str], turns: list[dict] | None = None) -> tuple[Path, Path]:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"instance_id": i, "question": "Report.", "answer": "x"}) + "\n" for i in ids))
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"instance_id": i, "turns": turns or [{"content": "unused"}]}) + "\n"
                              for i in ids))
    config = tmp_path / "config.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    return data, config


def probes(out: Path) -> dict[str, dict[str, str]]:
    return {r["instance_id"]: dict(kv.split("=") for kv in r["answer"].split()) for r in rows(out)}


@pytest.mark.parametrize("fork", ["1", "0"])
def test_nothing_leaks_from_one_instance_to_the_next(tmp_path, fork):
    data, config = dataset(tmp_path, ["one", "two", "three"])
    out = tmp_path / "out"
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--agent", "tests.helpers.runners:LeakProbe", "--workers", 1, "--scorer", "exact",
                   env={"HARNESS_AGENT_FORK": fork})
    assert proc.returncode == 0, explain(proc)
    seen = probes(out)
    assert len(seen) == 3
    for probe in seen.values():  # each instance finds the pristine state, whatever the one before did
        assert (probe["counter"], probe["env"]) == ("0", "absent"), seen
        assert probe["pid"] == probe["pgid"]  # its own process group (killed whole at the limit)
    assert len({p["pid"] for p in seen.values()}) == 3
    assert {p["preloaded"] for p in seen.values()} == {"True" if fork == "1" else "False"}


def agent_processes(harness_pid: int) -> list[int]:
    """Processes of the fork server started by this harness process, and its forks (the agents)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"harness.runner.forkserver" in argv and str(harness_pid).encode() in argv:
            found.append(int(entry.name))
    return found


def test_agents_die_with_the_harness(tmp_path):
    """SIGKILL the harness while agents run: the server and every forked agent go with it."""
    stall = [{"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 60"}}]}, {"content": "done"}]
    data, config = dataset(tmp_path, ["a", "b"], stall)
    run = subprocess.Popen([sys.executable, "-m", "harness", "run", "--dataset", str(data), "--model", "rec",
                            "--config", str(config), "--output-dir", str(tmp_path / "out"), "--workers", "2"],
                           cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while len(agent_processes(run.pid)) < 3 and time.monotonic() < deadline:  # the server and two agents
            time.sleep(0.2)
        assert len(agent_processes(run.pid)) >= 3, "no forked agents showed up"
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    deadline = time.monotonic() + 10
    while agent_processes(run.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert agent_processes(run.pid) == []
    subprocess.run([sys.executable, "-m", "harness", "cleanup"], cwd=REPO, capture_output=True, timeout=120)
