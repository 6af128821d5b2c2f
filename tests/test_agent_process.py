"""The agent-process layer (harness/runner/agent_process/): one protocol, its two implementations
(a fork of the fork server, a fresh interpreter) driven the same way against a real sandbox with a
trivial real agent (tests/helpers/scripted_agent.py); death with the parent; the trace read once."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.agents.contract import AgentRequest, Limits
from harness.datasets.model import Instance
from harness.errors import InfraError
from harness.models.config import ModelSection
from harness.runner.agent_process.process import AgentFiles, ForkedAgent, FreshAgent, start
from harness.runner.agent_process.servers import Server
from harness.sandbox.contract import SandboxSpec
from harness.traces import EnvAction, Message, ModelCall, ToolCall, Tracer
from harness.traces.forensics import read_facts
from tests.helpers.e2e import REPO

AGENT = "tests.helpers.scripted_agent:Scripted"
KINDS = ["forked", "fresh"]


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def in_repo():
    """The agent processes import tests.helpers.* as a user's own module: from the repository root."""
    before = os.getcwd()
    os.chdir(REPO)
    yield
    os.chdir(before)


@pytest.fixture(scope="module")
def sandbox(provider, image):
    run_id = f"test-{secrets.token_hex(4)}"
    box = provider.start(SandboxSpec(image=image, run_id=run_id, instance_id="agent-process", attempt=1))
    yield box
    provider.teardown(box)
    provider.cleanup(run_id=run_id)


def new_server() -> Server:
    server = Server.fresh(AGENT, "docker")
    server.ready.result(120)
    return server


@pytest.fixture(scope="module")
def server(in_repo):
    server = new_server()
    yield server
    server.close()


def files_for(tmp_path: Path, sandbox, do: str) -> AgentFiles:
    name = f"{do}-{secrets.token_hex(3)}"
    scratch = tmp_path / f"scratch-{name}"
    scratch.mkdir(mode=0o700)
    files = AgentFiles.in_dir(scratch, tmp_path / f"trace-{name}.jsonl")
    instance = Instance(instance_id=f"ap-{do}", question="q", answer="4", root=tmp_path, metadata={"do": do})
    request = AgentRequest(instance=instance, task="t", agent=AGENT, limits=Limits(), sandbox=sandbox.handle(),
                           model=ModelSection(name="rec", kind="replay", path=str(tmp_path / "unused.jsonl")),
                           trace_path=str(files.trace))
    files.request.write_text(request.model_dump_json())
    return files


def started(kind: str, files: AgentFiles, server):
    return ForkedAgent(files, server) if kind == "forked" else FreshAgent(files)


def helper_of(files: AgentFiles) -> int | None:
    """The pid of the `sleep` the sleeping agent started (its message says it), once it has."""
    text = read_facts(files.trace).last_message
    return int(text.split("helper=")[1]) if "helper=" in text else None


@pytest.mark.docker
@pytest.mark.parametrize("kind", KINDS)
def test_an_agent_that_answers_gives_its_result_and_its_trace(tmp_path, sandbox, server, kind):
    files = files_for(tmp_path, sandbox, "answer")
    proc = started(kind, files, server)
    assert proc.wait(120) and proc.returncode == 0
    result = proc.result()
    assert (result.final_message, result.error_kind, result.limit) == ("<solution>4</solution>", None, None), result
    trace = proc.trace()
    assert trace.last_message == "said before answering" and trace.env_outcomes == {"code": {"ok": 1}}, trace
    assert proc.trace() is trace  # read once


@pytest.mark.docker
@pytest.mark.parametrize("kind", KINDS)
def test_wait_keeps_its_deadline_and_kill_takes_the_whole_group(tmp_path, sandbox, server, kind):
    files = files_for(tmp_path, sandbox, "sleep")
    proc = started(kind, files, server)
    helper = wait_for(lambda: helper_of(files), 120, "the agent's own `sleep` started")
    t0 = time.monotonic()
    assert proc.wait(0.5) is False and proc.returncode is None
    assert 0.45 <= time.monotonic() - t0 < 30
    proc.kill()
    assert proc.wait(30) and proc.returncode == -signal.SIGKILL
    wait_for(lambda: not alive(helper), 10, "the agent's `sleep` killed with it (same process group)")
    assert proc.result(killed=True).limit == "wall_time"
    assert proc.trace().last_message == f"sleeping helper={helper}"
    proc.kill()  # an ended process: nothing to do


@pytest.mark.docker
@pytest.mark.parametrize("kind", KINDS)
def test_an_agent_that_dies_without_a_result_is_the_agents_error(tmp_path, sandbox, server, kind):
    proc = started(kind, files_for(tmp_path, sandbox, "exit"), server)
    assert proc.wait(120) and proc.returncode == 3
    result = proc.result()
    assert result.error_kind == "agent" and result.error.startswith("agent process exited 3: "), result
    assert "boom" in result.error


@pytest.mark.docker
def test_one_start_path_forks_when_the_server_is_up_else_starts_fresh(tmp_path, sandbox, server):
    """And the agents a dying server takes along are the harness's machinery failing: infra, retried."""
    forked = start(files_for(tmp_path, sandbox, "answer"), server)
    assert isinstance(forked, ForkedAgent) and forked.wait(120) and forked.result().final_message
    fresh = start(files_for(tmp_path, sandbox, "answer"), None)  # no server: disabled, failed or never started
    assert isinstance(fresh, FreshAgent) and fresh.wait(120) and fresh.result().final_message

    dying = new_server()
    files = files_for(tmp_path, sandbox, "sleep")
    lost = ForkedAgent(files, dying)
    helper = wait_for(lambda: helper_of(files), 120, "the agent's own `sleep` started")
    dying.proc.kill()
    assert lost.wait(30)
    with pytest.raises(InfraError, match="fork server .* died"):
        lost.result()
    wait_for(lambda: not alive(helper), 10, "the agent's `sleep` killed with its server")
    wait_for(lambda: dying.dead, 10, "the harness saw its server die")
    fallback = start(files_for(tmp_path, sandbox, "exit"), dying)  # dead: start falls back
    assert isinstance(fallback, FreshAgent) and fallback.wait(120) and fallback.returncode == 3


LIFELINE = ("import sys, time\n"
            "from harness.runner.agent_process.lifeline import die_with\n"
            "die_with(int(sys.argv[1]), watch=True)\n"
            "print('alive', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n")


def test_a_process_whose_given_parent_is_gone_exits_at_once():
    mine = subprocess.run([sys.executable, "-c", LIFELINE, str(os.getpid()), "0"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert (mine.returncode, mine.stdout) == (0, "alive\n"), mine.stderr
    other = subprocess.run([sys.executable, "-c", LIFELINE, str(os.getppid()), "0"], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert (other.returncode, other.stdout) == (1, ""), other.stderr


def test_a_process_dies_with_its_parent():
    parent = subprocess.Popen(
        [sys.executable, "-c", "import os, subprocess, sys, time\n"
         f"child = subprocess.Popen([sys.executable, '-c', {LIFELINE!r}, str(os.getpid()), '300'])\n"
         "print(child.pid, flush=True)\n"
         "time.sleep(300)\n"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        wait_for(lambda: alive(child), 30, "the child started")
    finally:
        parent.kill()
        parent.wait()
    wait_for(lambda: not alive(child), 10, "the child gone with its parent")


def test_the_trace_facts_are_what_the_parent_reads(tmp_path):
    path = tmp_path / "t.jsonl"
    tracer = Tracer(path)
    tracer.emit(ModelCall(model="m", usage={"prompt_tokens": 10, "completion_tokens": 2}))
    tracer.emit(ToolCall(source="a", name="run_shell", arguments={}, call_id="1"))
    tracer.emit(EnvAction(env="code", action="run_shell", outcome="ok"))
    tracer.emit(EnvAction(env="code", action="run_shell", outcome="timeout"))
    tracer.emit(Message(source="a", content="first"))
    tracer.emit(ModelCall(model="m", usage={"prompt_tokens": 5}))
    tracer.emit(Message(source="a", content="last"))
    tracer.close()
    with open(path, "a") as fh:
        fh.write('{"type": "message", "source": "a", "cont')  # torn by a kill
    facts = read_facts(path)
    assert (facts.usage.llm_calls, facts.usage.prompt_tokens, facts.usage.completion_tokens) == (2, 15, 2)
    assert (facts.last_message, facts.tool_calls) == ("last", ["run_shell"])
    assert facts.env_outcomes == {"code": {"ok": 1, "timeout": 1}}
    assert facts.waiting_on_model() is None and len(facts.events) == 7
    assert read_facts(tmp_path / "missing.jsonl").events == []


@pytest.mark.docker
def test_a_killed_agents_trace_is_read_once(tmp_path, image, provider, run_id, monkeypatch):
    """Salvage, the hung-model rule, the environment outcomes and the replay check all come from one
    read of the trace (they were four)."""
    from harness.runner.instance import run_instance
    from tests.test_errors import make_settings

    monkeypatch.chdir(REPO)
    inst, settings_ = make_settings(tmp_path, run_id, image, provider, agent=AGENT, max_retries=0)
    inst = inst.model_copy(update={"metadata": {"do": "sleep"}})
    settings_ = replace(settings_, limits=Limits(max_steps=5, instance_timeout=3))
    reads: list[Path] = []
    read_text = Path.read_text

    def counted(self, *args, **kwargs):
        if self.suffix == ".jsonl" and "traces" in self.parts:
            reads.append(self)
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    row = run_instance(inst, settings_).row
    assert (row.status, row.limit) == ("limit", "wall_time"), row
    assert row.answer is not None and row.answer.startswith("sleeping helper="), row  # salvaged from the trace
    assert len(reads) == 1 and reads[0] == settings_.output_dir / row.trace, reads
