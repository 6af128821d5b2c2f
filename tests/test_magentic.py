"""`harness run --agent magentic` end to end: a replayed orchestrator and coder, code run in a real sandbox.

MagenticOneGroupChat 0.7.5 makes these model calls, all through the one shared client, in order:
task facts, plan, then per round a progress ledger (JSON) naming the next speaker; the named agent
then speaks (the coder makes one model call; the executor none: it runs the coder's code block in
the sandbox); once a ledger says the request is satisfied, one final-answer call.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.helpers.e2e import containers_of, rows, run_replayed, trace


def ledger(next_speaker: str, instruction: str, satisfied: bool = False) -> dict:
    entry = {
        "is_request_satisfied": {"reason": "The sum has been computed." if satisfied else "Not done yet.",
                                 "answer": satisfied},
        "is_in_loop": {"reason": "No repetition so far.", "answer": False},
        "is_progress_being_made": {"reason": "Each step moves the task forward.", "answer": True},
        "next_speaker": {"reason": "Best placed for the next step.", "answer": next_speaker},
        "instruction_or_question": {"reason": "The next step of the plan.", "answer": instruction},
    }
    return {"content": "```json\n" + json.dumps(entry, indent=2) + "\n```"}


CODE = "import pandas as pd\nprint(pd.read_csv('/workspace/nums.csv').x.sum())\n"
FINAL = {"content": "The values of column x in nums.csv add up to 6.\n<solution>6</solution>"}
TURNS = [
    {"content": "1. GIVEN OR VERIFIED FACTS\n- The file nums.csv holds a column x.\n"
                "2. FACTS TO LOOK UP\n- None.\n3. FACTS TO DERIVE\n- The sum of column x.\n"
                "4. EDUCATED GUESSES\n- None."},
    {"content": "- coder: write Python that sums column x of /workspace/nums.csv.\n"
                "- executor: run it.\n- Report the sum."},
    ledger("coder", "Write Python that prints the sum of column x of /workspace/nums.csv."),
    {"content": f"This reads the CSV and prints the sum of column x.\n```python\n{CODE}```"},
    ledger("executor", "Run the coder's code."),
    ledger("coder", "unused", satisfied=True),
    FINAL,
    FINAL, FINAL,  # spares: never needed unless the team asks for more than scripted
]


@pytest.mark.docker
def test_magentic_team_orchestrates_a_coder_whose_code_runs_in_the_sandbox(tmp_path):
    proc, out = run_replayed(tmp_path, TURNS, "--agent", "magentic")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = rows(out)
    assert row["status"] == "ok", row
    assert row["correct"] is True and row["answer"] == "6"
    assert row["usage"]["llm_calls"] == 7  # facts, plan, 3 ledgers, coder, final answer

    events = trace(out, row)
    runs = [e for e in events if e["type"] == "env" and e.get("action") == "run_python"]
    assert len(runs) == 1 and runs[0]["exit_code"] == 0
    assert runs[0]["stdout"].strip() == "6"  # the code really ran in the sandbox
    assert "nums.csv" in runs[0]["args"]["code"]
    messages = [e for e in events if e["type"] == "message"]
    sources = [m["source"] for m in messages]
    assert {"coder", "executor", "MagenticOneOrchestrator"} <= set(sources)
    (executed,) = [m for m in messages if m["source"] == "executor"]
    assert "exit code: 0" in executed["content"] and "6" in executed["content"]
    assert sources.index("coder") < sources.index("executor")
    assert "<solution>6</solution>" in messages[-1]["content"]
    (offered,) = [e for e in events if e["type"] == "tools"]  # the members' tools, traced once
    assert set(offered["agents"]) == {"web_surfer", "file_surfer"} and "read_file" in offered["agents"]["file_surfer"]
    assert [d["function"]["name"] for d in offered["tools"]] == list(dict.fromkeys(
        name for names in offered["agents"].values() for name in names))
    assert containers_of(out) == []


class FakeCode:
    def __init__(self, fail: Exception | None = None):
        self.calls, self.fail = [], fail

    def _run(self, kind, text):
        from harness.sandbox.contract import ExecResult

        self.calls.append((kind, text))
        if self.fail:
            raise self.fail
        return ExecResult(exit_code=3 if "boom" in text else 0, stdout=f"{kind} out\n", stderr="")

    def run_python(self, code):
        return self._run("python", code)

    def run_shell(self, command):
        return self._run("shell", command)


def test_sandbox_code_executor_routes_languages_stops_at_failures_and_propagates_infra_errors():
    import asyncio

    from autogen_core import CancellationToken
    from autogen_core.code_executor import CodeBlock

    from harness.agents.autogen.executor import SandboxCodeExecutor
    from harness.environments import Environments
    from harness.errors import SandboxDied

    code = FakeCode()
    executor = SandboxCodeExecutor(Environments({"code": code}))
    run = lambda blocks: asyncio.run(executor.execute_code_blocks(blocks, CancellationToken()))  # noqa: E731

    result = run([CodeBlock("print(1)", "python"), CodeBlock("ls", "bash")])
    assert result.exit_code == 0 and "python out" in result.output and "shell out" in result.output
    assert code.calls == [("python", "print(1)"), ("shell", "ls")]

    code.calls.clear()
    result = run([CodeBlock("boom", "sh"), CodeBlock("print(2)", "python")])
    assert result.exit_code == 3 and code.calls == [("shell", "boom")]  # stops at the first failure

    result = run([CodeBlock("x", "rust")])
    assert result.exit_code == 1 and "unsupported language 'rust'" in result.output

    fatal = []
    dead = SandboxCodeExecutor(Environments({"code": FakeCode(SandboxDied("gone"))}, on_fatal=fatal.append))
    with pytest.raises(SandboxDied):
        asyncio.run(dead.execute_code_blocks([CodeBlock("print(1)", "python")], CancellationToken()))
    assert len(fatal) == 1 and isinstance(fatal[0], SandboxDied)


def _team_tools(team) -> dict[str, list[str]]:
    """Each member's tool names, as its model is sent them."""
    async def listed():
        return {m.name: [t["name"] for bench in getattr(m, "_workbench", None) or [] for t in await bench.list_tools()]
                for m in team._participants}
    return asyncio.run(listed())


def _replay_client():
    """The AutoGen client a replay section gets (function calling, as the agents need)."""
    from harness.agents.autogen.models import inner_client
    from harness.models.config import ModelSection

    return inner_client(ModelSection(name="rec", kind="replay", path="unused.jsonl"))


def _dry(search: bool, mcp: bool):
    """Dry environments (agents/dry.py) with the run's search provider and one MCP tool, or without."""
    from harness.agents.contract import Limits
    from harness.agents.dry import dry_environments
    from harness.environments.tools import SchemaTool
    from harness.environments.websearch.settings import SearchSettings

    async def call(arguments):
        return "3"

    envs = dry_environments(Limits(), search=SearchSettings(provider="tavily") if search else None)
    if mcp:
        envs.built["mcp"] = [SchemaTool("calc__add", "Add two integers.", {"type": "object", "properties": {}}, call)]
    return envs


@pytest.mark.parametrize(("search", "mcp"), [(True, True), (False, False)])
def test_magentic_gives_web_search_to_its_web_surfer_and_mcp_tools_to_its_coder(search, mcp):
    from harness.agents.autogen.builtin import magentic
    from harness.agents.contract import Limits

    tools = _team_tools(magentic(_replay_client(), _dry(search, mcp), None, Limits()))
    assert ("web_search" in tools["web_surfer"]) is search
    assert {"visit_url", "fetch_url"} <= set(tools["web_surfer"])  # with or without a search provider
    assert tools["coder"] == (["calc__add"] if mcp else [])
    assert not any("web_search" in names for member, names in tools.items() if member != "web_surfer")


def test_every_sandbox_tool_has_a_member_of_the_magentic_team():
    """Before, the team's members held neither transcribe_audio nor video_frames: a Magentic run could not
    hear a recording or see a video that the plain and assistant agents could (tools.py offers them)."""
    from harness.agents.autogen.builtin import magentic
    from harness.agents.contract import Limits
    from harness.agents.dry import dry_environments
    from harness.environments.tools import sandbox_tools
    from harness.models.config import ModelSection

    section = ModelSection(name="m", model="x", transcription_model="whisper-1", model_info={"vision": True})
    envs = dry_environments(Limits(), section)
    offered = {t.__name__ for t in sandbox_tools(envs)}
    assert {"transcribe_audio", "video_frames", "view_image", "fetch_url"} <= offered
    held = {name for names in _team_tools(magentic(_replay_client(), envs, None, Limits())).values() for name in names}
    assert offered - held == {"run_python", "run_shell"}  # the executor runs the coder's code blocks instead


def test_the_websurfer_teams_assistant_holds_web_search_and_the_mcp_tools():
    """MultimodalWebSurfer's tools are AutoGen's own: the team's assistant holds the run's search and MCP
    tools. The sandbox's browser is stood in for (no Playwright context: the surfer opens none while built)."""
    from harness.agents.autogen.builtin import websurfer
    from harness.agents.contract import Limits

    envs = _dry(True, True)

    async def playwright():
        return None, None

    envs.built["browser"].playwright = playwright
    tools = _team_tools(asyncio.run(websurfer(_replay_client(), envs, None, Limits())))
    assert {"web_search", "calc__add", "run_python"} <= set(tools["assistant"])


def _sent(team) -> dict[str, dict]:
    """Every member's tools as AutoGen's OpenAI client converts them for the request, by name."""
    from autogen_ext.models.openai._openai_client import convert_tools

    async def listed():
        return [t for m in team._participants for bench in getattr(m, "_workbench", None) or []
                for t in await bench.list_tools()]
    return {d["function"]["name"]: dict(d, function=dict(d["function"])) for d in convert_tools(asyncio.run(listed()))}


def test_a_teams_traced_tools_are_what_its_members_models_are_sent_member_by_member():
    from harness.agents.autogen.builtin import magentic, websurfer
    from harness.agents.autogen.tools import offered_by
    from harness.agents.contract import Limits

    team = magentic(_replay_client(), _dry(True, True), None, Limits())
    offered = offered_by(team)
    assert offered.agents == {m: names for m, names in _team_tools(team).items() if names}
    assert {d["function"]["name"]: d for d in offered.tools} == _sent(team)

    envs = _dry(True, True)

    async def playwright():
        return None, None

    envs.built["browser"].playwright = playwright
    surfing = offered_by(asyncio.run(websurfer(_replay_client(), envs, None, Limits())))
    assert {"visit_url", "click"} <= set(surfing.agents["web_surfer"])  # MultimodalWebSurfer's own (default_tools)
    assert {"web_search", "calc__add", "run_python"} <= set(surfing.agents["assistant"])
