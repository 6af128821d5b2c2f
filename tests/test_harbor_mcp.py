"""MCP servers a Harbor task declares (`[[environment.mcp_servers]]`, harness/benchmarks/harbor/mcp.py): a stdio
server runs inside the task's sandbox, as Harbor's agent starts it inside the task's container, and its tools reach
the agent as the harness's MCP tools (`vault__get_secret`); a url server is refused at load, naming the key.

The task folder tests/data/harbor_tasks/mcp_stdio (Harbor's oracle scores it 1.0, a do-nothing agent 0: its server is
of the standard library alone) runs in real sandboxes of its own image (its FROM line made the python3 base): the
oracle passes it; a replayed agent calls the tool, sees the sandbox's host name in its answer, and passes; on a
multi-step variant it calls the tool in each step (the server started afresh for each agent run, after the step
before's verifier ended it). Before: the key was accepted and nothing served (the agent had no such tool)."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from harness.benchmarks.harbor.dataset import load
from harness.errors import InputError
from tests.helpers.e2e import explain, harness, out_dir, remove_leftovers, rows, trace
from tests.test_harbor import python_task_base

DATA = Path(__file__).parent / "data" / "harbor_tasks"
TASK = DATA / "mcp_stdio"
SECRET = {"tool_calls": [{"name": "vault__get_secret", "arguments": {}}]}


def shell(command: str) -> dict:
    return {"tool_calls": [{"name": "run_shell", "arguments": {"command": command}}]}


def with_base(folder: Path, base: str) -> Path:
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("FROM debian:bookworm-slim", f"FROM {base}"))
    return folder


@pytest.fixture(scope="module")
def ran(tmp_path_factory, provider, image):
    """The oracle, and a replayed agent on the task and on a multi-step variant of it: one run each."""
    tmp = tmp_path_factory.mktemp("mcp")
    with python_task_base() as (py, _, made):
        oracle_tasks, tasks = tmp / "oracle", tmp / "tasks"
        made.append(with_base(shutil.copytree(TASK, oracle_tasks / "mcp_stdio"), py) / "environment")
        with_base(shutil.copytree(TASK, tasks / "mcp_stdio"), py)
        stepped = with_base(shutil.copytree(DATA / "multi_step", tasks / "mcp_steps"), py)  # its image with the server
        shutil.copy(TASK / "environment" / "Dockerfile", stepped / "environment" / "Dockerfile")
        shutil.copy(TASK / "environment" / "server.py", stepped / "environment" / "server.py")
        with_base(stepped, py)
        toml = (TASK / "task.toml").read_text().split("[[environment.mcp_servers]]")[1]
        (stepped / "task.toml").write_text((stepped / "task.toml").read_text().replace(
            "[[steps]]", f"[[environment.mcp_servers]]{toml}\n[[steps]]", 1))
        made.append(stepped / "environment")
        turns = {"mcp_stdio": [SECRET, shell("echo swordfish > answer.txt"), {"content": "<solution>ok</solution>"}],
                 "mcp_steps": [SECRET, shell("echo hello > answer.txt"), {"content": "<solution>one</solution>"},
                               SECRET, shell('echo "hello $(cat suffix.txt)" > answer.txt'),
                               {"content": "<solution>two</solution>"}]}
        (tasks / "replay.jsonl").write_text("".join(json.dumps({"instance_id": n, "turns": t}) + "\n"
                                                    for n, t in turns.items()))
        (oracle_tasks / "replay.jsonl").write_text(json.dumps({"instance_id": "mcp_stdio", "turns": []}) + "\n")
        outs = {"oracle": out_dir(tmp, "oracle"), "agent": out_dir(tmp, "agent")}
        try:
            yield {"oracle": harness("run", "--dataset", f"harbor:{oracle_tasks}", "--agent", "oracle", "--model",
                                     "replay", "--output-dir", outs["oracle"]),
                   "agent": harness("run", "--dataset", f"harbor:{tasks}", "--agent", "plain", "--model", "replay",
                                    "--output-dir", outs["agent"])}, outs
        finally:
            for out in outs.values():
                assert remove_leftovers(out) == [], "containers left behind"


@pytest.mark.docker
def test_the_oracle_passes_the_mcp_task(ran):
    done, outs = ran
    assert done["oracle"].returncode == 0, explain(done["oracle"])
    [row] = rows(outs["oracle"])
    assert row["correct"] is True and row["verdicts"]["harbor"]["reward"] == 1.0, row


@pytest.mark.docker
def test_the_tasks_stdio_server_runs_in_its_sandbox_for_each_agent_run(ran):
    done, outs = ran
    assert done["agent"].returncode == 0, explain(done["agent"])
    got = {r["instance_id"]: r for r in rows(outs["agent"])}
    assert {n: (r["status"], r["correct"]) for n, r in got.items()} == {
        "mcp_stdio": ("ok", True), "mcp_steps": ("ok", True)}, got
    assert [s["reward"] for s in got["mcp_steps"]["verdicts"]["harbor"]["steps"]] == [1.0, 1.0]
    for name, calls in (("mcp_stdio", 1), ("mcp_steps", 2)):
        events = trace(outs["agent"], got[name])
        offered = [[t["function"]["name"] for t in e["tools"]] for e in events if e["type"] == "tools"]
        assert len(offered) == calls and all(names.count("vault__get_secret") == 1 for names in offered), offered
        answers = [e["content"] for e in events if e["type"] == "tool_result" and e.get("name") == "vault__get_secret"]
        assert len(answers) == calls and all(a.startswith("swordfish (from ") for a in answers), answers
        assert all(socket.gethostname() not in a for a in answers), answers  # the sandbox's host, not this one


# ---------------------------------------------------------------- what cannot be served, refused at load

@pytest.mark.parametrize(("table", "says"), [
    ('name = "docs"\ntransport = "streamable-http"\nurl = "http://mcp-server:8000/mcp"\n',
     "environment.mcp_servers[0] ('docs').transport 'streamable-http' (url 'http://mcp-server:8000/mcp') is not "
     "supported"),
    ('name = "docs"\nurl = "https://mcp.example.com/sse"\n', "environment.mcp_servers[0] ('docs').transport 'sse'"),
    ('name = "my vault"\ntransport = "stdio"\ncommand = "python3"\n',
     "environment.mcp_servers[0] ('my vault').name: a server's name prefixes its tools' names"),
    ('name = "vault"\ntransport = "stdio"\n', "environment.mcp_servers[0] ('vault').command: a stdio server needs"),
    ('name = "vault"\ntransport = "stdio"\ncommand = "python3"\nenv = { A = "1" }\n', "mcp_servers.0.env"),
    ('name = "vault"\ntransport = "stdio"\ncommand = "python3"\n[[environment.mcp_servers]]\nname = "vault"\n'
     'transport = "stdio"\ncommand = "true"\n', "environment.mcp_servers[1] ('vault').name: a server of that name"),
])
def test_an_mcp_server_that_cannot_be_served_is_refused_naming_the_key(tmp_path, table, says):
    folder = shutil.copytree(TASK, tmp_path / "task")
    toml = (folder / "task.toml").read_text().split("[[environment.mcp_servers]]")[0]
    (folder / "task.toml").write_text(f"{toml}[[environment.mcp_servers]]\n{table}")
    with pytest.raises(InputError) as refused:
        load(folder)
    assert says in str(refused.value) and f"{folder.resolve()}: task.toml" in str(refused.value), refused.value


def test_a_tasks_stdio_server_is_the_instances_own_and_a_runs_of_its_name_takes_its_place():
    from harness.environments.mcp_config import McpServer, for_instance

    [instance] = load(TASK).instances
    [own] = for_instance((), instance)
    assert (own.name, own.command, own.args) == ("vault", "python3", ("/opt/vault/server.py",))
    run = (McpServer(name="vault", url="https://example.com/mcp"), McpServer(name="calc", command="calc"))
    assert [(s.name, s.url or s.command) for s in for_instance(run, instance)] == [
        ("vault", "https://example.com/mcp"), ("calc", "calc")]
