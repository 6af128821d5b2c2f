"""Gaia2 in a real sandbox: ARE (in the gaia2 image's own virtual environment) runs a scenario and serves its apps
over MCP (images/gaia2/gaia2_driver.py), reached through the harness's own MCP bridge; the oracle's actions,
played through those tools (harness/benchmarks/gaia2/oracle.py), pass ARE's judge, and wrong ones fail it."""

from __future__ import annotations

import asyncio
import json
import os
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from harness.benchmarks.gaia2 import oracle
from harness.environments.mcp_config import McpServer
from harness.sandbox.contract import SandboxSpec

pytestmark = pytest.mark.docker
SMOKE = Path(os.environ.get("HARNESS_GAIA2_SMOKE", Path(__file__).resolve().parents[1] / "datasets" / "gaia2-smoke"))


@pytest.fixture(scope="module")
def gaia2_image(provider, image):
    return provider.image_of("gaia2", log=lambda m: None)


async def _session_run(sandbox, name: str, work):
    from harness.environments.mcp_tools import connect

    server = McpServer(name="gaia2", command="/opt/are/bin/python",
                       args=("/opt/harness/gaia2_driver.py", f"/workspace/{name}"), timeout=120)
    async with AsyncExitStack() as stack:
        session = await connect(stack, server, sandbox, None)
        return await work(session)


def _text(result) -> str:
    return "\n".join(part.text for part in result.content if part.type == "text")


def _run(provider, gaia2_image, run_id, name: str, work):
    with provider.open(SandboxSpec(image=gaia2_image, run_id=run_id, instance_id=name.split(".")[0])) as sb:
        sb.copy_in(SMOKE, [name])
        return asyncio.run(_session_run(sb, name, work))


def test_the_oracle_played_through_the_scenarios_tools_passes_ares_judge(provider, gaia2_image, run_id):
    name = "proto_forward_email.json"
    scenario = json.loads((SMOKE / name).read_text())

    async def work(session):
        listed = {tool.name for tool in (await session.list_tools()).tools}
        assert {"Emails__forward_email", "AgentUserInterface__send_message_to_user", "harness__finish"} <= listed
        assert "AgentUserInterface__get_all_messages" not in listed  # hidden, as ARE's own agent hides them
        task = _text(await session.call_tool("harness__task", {}))
        assert task.startswith("Greg Barty will email me")

        async def call(tool, args):
            result = await session.call_tool(tool, args)
            assert not result.is_error, _text(result)
            return _text(result)

        async def event(event_id):
            return json.loads(_text(await session.call_tool("harness__event", {"event_id": event_id})))

        results = await oracle.play(scenario, call, event)
        return results, json.loads(_text(await session.call_tool("harness__finish", {})))

    results, verdict = _run(provider, gaia2_image, run_id, name, work)
    assert verdict["verdict"] == "pass" and verdict["success"] is True, verdict
    assert [a["matched"] for a in verdict["oracle_actions"]] == [True, True]
    assert "the task is over" in results[-1]


def test_a_wrong_action_fails_ares_judge_with_its_reason(provider, gaia2_image, run_id):
    name = "proto_forward_email.json"

    async def work(session):
        await session.call_tool("harness__task", {})
        await session.call_tool("AgentUserInterface__send_message_to_user", {"content": "I could not do it."})
        return json.loads(_text(await session.call_tool("harness__finish", {})))

    verdict = _run(provider, gaia2_image, run_id, name, work)
    assert verdict["verdict"] == "fail" and verdict["success"] is False and verdict["rationale"], verdict
    assert not any(a["matched"] for a in verdict["oracle_actions"] if a["tool"].endswith("forward_email"))


def test_the_scenario_file_with_its_oracle_actions_is_gone_before_the_agents_first_turn(provider, gaia2_image, run_id):
    """The scenario file holds the oracle's actions; an agent whose code runs in the sandbox must not read them."""
    name = "proto_forward_email.json"
    with provider.open(SandboxSpec(image=gaia2_image, run_id=run_id, instance_id="gone")) as sb:
        sb.copy_in(SMOKE, [name])
        assert sb.exec(["test", "-e", f"/workspace/{name}"]).exit_code == 0

        async def work(session):
            await session.call_tool("harness__task", {})  # the harness's step before the agent's first turn
            return sb.exec(["test", "-e", f"/workspace/{name}"]).exit_code

        assert asyncio.run(_session_run(sb, name, work)) == 1


@pytest.mark.parametrize("noise", [False, True])
def test_the_noise_phase_makes_ares_tools_fail_at_random_as_are_runs_it(provider, gaia2_image, run_id, noise):
    """Gaia2's noise phase (ARE's create_noise_configs, the driver's --noise): each app tool fails with ARE's
    probability (0.1), so 100 calls see failures (all succeed with a chance of 3e-5); the standard phase never."""
    from harness.environments.mcp_tools import connect

    name = "proto_forward_email.json"
    server = McpServer(name="gaia2", command="/opt/are/bin/python", timeout=120,
                       args=("/opt/harness/gaia2_driver.py", f"/workspace/{name}", *(["--noise"] if noise else [])))

    async def calls(sandbox) -> list[bool]:
        async with AsyncExitStack() as stack:
            session = await connect(stack, server, sandbox, None)
            await session.call_tool("harness__task", {})
            return [(await session.call_tool("Contacts__get_contacts", {})).is_error for _ in range(100)]

    with provider.open(SandboxSpec(image=gaia2_image, run_id=run_id, instance_id=f"noise-{noise}")) as sb:
        sb.copy_in(SMOKE, [name])
        failed = asyncio.run(calls(sb))
    assert (sum(failed) > 0) is noise, sum(failed)


def test_the_verdict_of_a_killed_agents_scenario_is_asked_of_the_driver_that_outlives_it(provider, gaia2_image, run_id,
                                                                                         monkeypatch):
    """The agent's session tells the user the answer in its own words and goes without asking for the verdict (its
    process killed at its wall-clock limit): the host opens a session of its own on the driver, still running in
    the sandbox, and gets ARE's verdict, its LLM judge's calls answered on the host by the run's judge model."""
    from harness.benchmarks.gaia2.environment import verdict_after_kill
    from harness.environments.mcp_tools import connect
    from harness.models.config import ModelSection
    from tests.fakes.openai_server import FakeOpenAI, text

    name, says = "proto_find_image_file.json", "It is llama.jpg, in your Downloads folder."
    server = McpServer(name="gaia2", command="/opt/are/bin/python", timeout=120,
                       args=("/opt/harness/gaia2_driver.py", f"/workspace/{name}", "--judge", "llm",
                             "--judge-model", "judge-model"))

    async def agent(sandbox) -> None:
        async with AsyncExitStack() as stack:
            session = await connect(stack, server, sandbox, None)
            await session.call_tool("harness__task", {})
            await session.call_tool("AgentUserInterface__send_message_to_user", {"content": says})

    monkeypatch.setenv("FAKE_JUDGE_KEY", "sk-fake")
    with FakeOpenAI([], default=text("Evaluation: [[Success]] [[True]]", usage=(50, 5))) as fake, \
            provider.open(SandboxSpec(image=gaia2_image, run_id=run_id, instance_id="killed")) as sb:
        judge = ModelSection(name="judge", model="judge-model", base_url=fake.base_url, api_key_env="FAKE_JUDGE_KEY",
                             max_retries=0)
        sb.copy_in(SMOKE, [name])
        asyncio.run(agent(sb))  # gone without harness__finish, as a killed agent's process
        verdict = verdict_after_kill(sb, judge)
        asked = fake.chat_requests
    assert verdict is not None and verdict["verdict"] == "pass" and verdict["judge"] == "llm", verdict
    assert asked and any(says in json.dumps(r["json"]) for r in asked)  # ARE's soft check, answered on the host
    assert verdict["judge_usage"]["llm_calls"] == len(asked)
    with provider.open(SandboxSpec(image=gaia2_image, run_id=run_id, instance_id="no-driver")) as sb:
        assert verdict_after_kill(sb, judge, bound=10) is None  # no driver there: not judged, never a guess
