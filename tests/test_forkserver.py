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
from tests.helpers.locks import machine_lock

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


def descendants(root: int) -> set[int]:
    """Live processes below `root` (the fork server, a fork of the harness, and its forks, the agents)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    left = set()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                left.add(pid)
        except OSError:
            pass
    return left


def test_agents_die_with_the_harness(tmp_path):
    """SIGKILL the harness while agents run: the server and every forked agent go with it."""
    stall = [{"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 60"}}]}, {"content": "done"}]
    data, config = dataset(tmp_path, ["a", "b"], stall)
    run = subprocess.Popen([sys.executable, "-m", "harness", "run", "--dataset", str(data), "--model", "rec",
                            "--config", str(config), "--output-dir", str(tmp_path / "out"), "--workers", "2"],
                           cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while len(below := descendants(run.pid)) < 3 and time.monotonic() < deadline:  # the server, two agents
            time.sleep(0.2)
        assert len(below) >= 3, f"no forked agents showed up: {below}"
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    deadline = time.monotonic() + 10
    while alive(below) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive(below) == set()
    with machine_lock("reap"):  # tests/helpers/locks.py
        subprocess.run([sys.executable, "-m", "harness", "cleanup"], cwd=REPO, capture_output=True, timeout=120)


PROBE = """
import json, os, sys, threading, time
from harness.runner.agent_process.servers import ForkServers

held = open(sys.argv[1], "w")  # a file of the harness's that no server may hold
forks = ForkServers()


def probe(agent):
    forks.start(agent)
    server = forks.server_for(agent)
    fds = [os.readlink(f"/proc/{server.proc.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{server.proc.pid}/fd")]
    return {"kind": type(server.proc).__name__, "holds_file": sys.argv[1] in fds, "pid": server.proc.pid}


seen = {"main": probe("plain")}  # the main thread of a process without other threads: a fork of it
worker = threading.Thread(target=lambda: seen.update(thread=probe("assistant")))
worker.start()
worker.join()
procs = [forks.start(a).result().proc for a in ("plain", "assistant")]  # started once: the same servers
forks.close()
seen["ended"] = all(p.wait(5) is not None for p in procs)
seen["none_after_close"] = forks.server_for("plain") is None  # never started on first use
loading = forks.start("assistant").result()  # closed while it still imports the agent framework
started = time.monotonic()
forks.close()
seen["closed_while_loading"] = (loading.proc.wait(5), time.monotonic() - started < 5)
print(json.dumps(seen))
"""


def test_the_server_is_a_fork_of_a_single_threaded_harness_else_a_fresh_interpreter(tmp_path):
    """A fork costs the server only the imports the harness has not done; a harness with other threads
    is not forked (a lock held by one of them would stay held in the fork) and gets a fresh one.
    Neither holds the harness's files, and both end with close_all, even while still loading."""
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "held")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["main"]["kind"] == "_ForkedProcess" and seen["thread"]["kind"] == "Popen", seen
    assert not seen["main"]["holds_file"] and not seen["thread"]["holds_file"], seen
    # One still loading is killed, not waited for: a resume with nothing to do does not wait for the
    # agent framework's imports (~0.25 s of 1.0 with an AutoGen agent).
    assert seen["ended"] and seen["none_after_close"] and seen["closed_while_loading"] == [-signal.SIGKILL, True], seen


def test_an_agent_killed_before_its_setsid_still_dies(tmp_path):
    """The fork server answers with a child's pid before the child has called `setsid`; a Ctrl-C in that window
    (kill_all) found no process group of that id and left the agent running (a run under a load average of 80
    went on 60 s past its SIGINT). A process outside a group of its own stands for that child here."""
    from harness.runner.agent_process.process import AgentFiles, AgentProcess

    class NotYetInItsSession(AgentProcess):
        def __init__(self, proc: subprocess.Popen):
            super().__init__(AgentFiles.in_dir(tmp_path, tmp_path / "trace.jsonl"))
            self.proc, self.pid = proc, proc.pid

        def _exit_code(self, timeout: float | None) -> int | None:
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return None

    child = subprocess.Popen(["sleep", "60"])  # in this test's process group, as a fork before its setsid is
    try:
        agent = NotYetInItsSession(child)
        agent.kill()
        assert agent.wait(10) and agent.returncode == -signal.SIGKILL
    finally:
        child.kill()
        child.wait()
