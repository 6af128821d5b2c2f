"""`[llm.NAME] provider`: anthropic, azure and gemini through their real SDKs (and AutoGen's clients),
against servers speaking each wire format (tests/fakes/providers.py), for the plain runner's chat
model, the AutoGen client, the LLM judge and the preflight probe."""

from __future__ import annotations

import asyncio

import pytest
from autogen_core.models import FunctionExecutionResult, FunctionExecutionResultMessage, SystemMessage, UserMessage
from autogen_core.tools import FunctionTool

from harness.agents.autogen.models import build_client
from harness.errors import InputError, ModelError
from harness.models.completion import completer
from harness.models.config import GEMINI_BASE_URL, parse_section
from harness.models.factory import chat_model
from harness.models.meter import Meter
from harness.models.probe import ModelCheck, probe_all
from harness.usage import Price
from tests.fakes.openai_server import text, tool_calls
from tests.fakes.providers import FakeAnthropic, FakeAzure, FakeGemini, anthropic_error

KEYS = {"ANTHROPIC_API_KEY": "sk-ant-fake", "AZURE_OPENAI_API_KEY": "azure-fake-key",
        "GEMINI_API_KEY": "gemini-fake-key"}
TOOLS = [{"type": "function", "function": {"name": "run_python", "description": "Run Python code.",
                                           "parameters": {"type": "object", "properties": {"code": {"type": "string"}},
                                                          "required": ["code"]}}}]


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


def section(server, provider: str, **extra):
    raw = {"provider": provider, "model": server.model, "max_retries": 3, "timeout": 20, **extra}
    if provider == "azure":
        raw.update(azure_endpoint=server.base_url, api_version="2024-10-21", deployment=server.deployment)
    else:
        raw["base_url"] = server.base_url
    return parse_section({"llm": {"m": raw}}, "m")


def meter() -> Meter:
    return Meter(max_tokens=None, max_steps=None, price=Price(input=1.0, output=2.0))


# -- configuration -------------------------------------------------------------------------------

def test_provider_defaults_and_refusals():
    gemini = parse_section({"llm": {"g": {"provider": "gemini", "model": "gemini-2.0-flash"}}}, "g")
    assert gemini.endpoint() == GEMINI_BASE_URL and gemini.key_env() == "GEMINI_API_KEY"
    assert gemini.api_key() == KEYS["GEMINI_API_KEY"]
    assert parse_section({"llm": {"a": {"provider": "anthropic", "model": "x"}}}, "a").key_env() == "ANTHROPIC_API_KEY"
    assert parse_section({"llm": {"o": {"model": "x"}}}, "o").provider == "openai"
    with pytest.raises(InputError, match=r"\[llm.z\].*provider.*'bedrock'"):
        parse_section({"llm": {"z": {"provider": "bedrock", "model": "x"}}}, "z")
    with pytest.raises(InputError, match=r"\[llm.z\].*needs azure_endpoint and api_version"):
        parse_section({"llm": {"z": {"provider": "azure", "model": "x"}}}, "z")
    with pytest.raises(InputError, match=r"\[llm.z\].*deployment: only for provider \"azure\""):
        parse_section({"llm": {"z": {"model": "x", "deployment": "d"}}}, "z")


def test_a_missing_provider_key_is_an_input_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(InputError, match="ANTHROPIC_API_KEY is not set"):
        parse_section({"llm": {"a": {"provider": "anthropic", "model": "x"}}}, "a").api_key()


# -- the plain runner's chat model -----------------------------------------------------------------

def _tool_round(chat, reply) -> list[dict]:
    call = reply.tool_calls[0]
    return [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": '{"code": "1"}'}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": "exit code: 0\n1"}]


def test_anthropic_chat_tool_use_usage_and_retried_errors():
    script = [anthropic_error(429, "rate_limit_error", headers={"retry-after": "0"}),
              anthropic_error(529, "overloaded_error", headers={"retry-after": "0"}),
              tool_calls(("run_python", {"code": "1"}), usage=(100, 20)),
              text("<solution>1</solution>", usage=(150, 5))]
    with FakeAnthropic(script, key=KEYS["ANTHROPIC_API_KEY"], cache_read=30) as server:
        counted = meter()

        async def go():
            chat = chat_model(section(server, "anthropic", temperature=0.0), counted, None)
            messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q"}]
            first = await chat.complete(messages, TOOLS)
            messages += _tool_round(chat, first)
            second = await chat.complete(messages, TOOLS)
            await chat.close()
            return first, second

        first, second = asyncio.run(go())
    assert [status for status, _ in server.responses] == [429, 529, 200, 200]  # the SDK's own retries
    assert first.tool_calls[0]["name"] == "run_python" and first.tool_calls[0]["arguments"] == {"code": "1"}
    assert first.tool_calls[0]["id"].startswith("toolu_")
    # cache reads counted as prompt, and as a class of their own
    assert first.usage == {"prompt_tokens": 130, "completion_tokens": 20, "cached_prompt_tokens": 30}
    assert second.content == "<solution>1</solution>" and not second.tool_calls
    assert counted.calls == 2 and counted.totals.prompt_tokens == 130 + 180 and counted.totals.completion_tokens == 25
    body = server.chat_requests[-1]["json"]
    assert body["system"] == "be brief" and body["max_tokens"] == 4096 and body["temperature"] == 0.0
    assert body["tools"] == [{"name": "run_python", "description": "Run Python code.",
                              "input_schema": TOOLS[0]["function"]["parameters"]}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [{"type": "tool_use", "id": first.tool_calls[0]["id"],
                                               "name": "run_python", "input": {"code": "1"}}]
    assert body["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": first.tool_calls[0]["id"],
                                               "content": "exit code: 0\n1"}]


def test_anthropic_401_is_a_model_error_not_retried():
    with FakeAnthropic([], key="another-key") as server:
        async def go():
            chat = chat_model(section(server, "anthropic"), meter(), None)
            try:
                await chat.complete([{"role": "user", "content": "q"}], [])
            finally:
                await chat.close()

        with pytest.raises(ModelError, match="AuthenticationError.*authentication_error"):
            asyncio.run(go())
    assert len(server.requests) == 1


@pytest.mark.parametrize("fake", [FakeAzure, FakeGemini])
def test_azure_and_gemini_chat_reach_their_urls_with_their_keys(fake):
    with fake([tool_calls(("run_python", {"code": "1"}), usage=(11, 4))]) as server:
        async def go():
            chat = chat_model(section(server, "azure" if fake is FakeAzure else "gemini"), meter(), None)
            try:
                return await chat.complete([{"role": "user", "content": "q"}], TOOLS)
            finally:
                await chat.close()

        reply = asyncio.run(go())
    assert reply.tool_calls[0]["arguments"] == {"code": "1"} and reply.usage["prompt_tokens"] == 11
    assert [status for status, _ in server.responses] == [200]  # the gate let it through: right URL and key
    if fake is FakeAzure:
        assert server.api_versions == ["2024-10-21"]
        assert server.chat_requests[0]["headers"]["api-key"] == KEYS["AZURE_OPENAI_API_KEY"]


# -- the AutoGen client ----------------------------------------------------------------------------

async def run_python(code: str) -> str:
    return code


@pytest.mark.parametrize("fake", [FakeAnthropic, FakeAzure, FakeGemini])
def test_autogen_clients_of_each_provider(fake):
    provider = {FakeAnthropic: "anthropic", FakeAzure: "azure", FakeGemini: "gemini"}[fake]
    script = [tool_calls(("run_python", {"code": "1"}), usage=(40, 6)), text("<solution>1</solution>", usage=(50, 3))]
    tool = FunctionTool(run_python, description="Run Python code.")
    with fake(script) as server:
        counted = meter()

        async def go():
            client = build_client(section(server, provider, temperature=0.0), counted, None)
            messages = [SystemMessage(content="be brief"), UserMessage(content="q", source="user")]
            first = await client.create(messages, tools=[tool])
            call = first.content[0]
            from autogen_core.models import AssistantMessage

            messages += [AssistantMessage(content=first.content, source="agent"),
                         FunctionExecutionResultMessage(content=[FunctionExecutionResult(
                             call_id=call.id, content="1", name=call.name, is_error=False)])]
            second = await client.create(messages, tools=[tool])
            await client.close()
            return first, second

        first, second = asyncio.run(go())
    assert first.content[0].name == "run_python" and first.usage.prompt_tokens == 40
    assert second.content == "<solution>1</solution>"
    assert counted.calls == 2 and counted.totals.prompt_tokens == 90 and counted.totals.completion_tokens == 9
    assert [status for status, _ in server.responses] == [200, 200]
    if fake is FakeAnthropic:
        body = server.chat_requests[-1]["json"]
        assert body["system"] == "be brief" and body["temperature"] == 0.0
        assert body["messages"][-1]["content"][0]["type"] == "tool_result"


# -- the judge and the preflight -------------------------------------------------------------------

@pytest.mark.parametrize("fake", [FakeAnthropic, FakeAzure, FakeGemini])
def test_judge_speaks_each_provider(fake):
    provider = {FakeAnthropic: "anthropic", FakeAzure: "azure", FakeGemini: "gemini"}[fake]
    with fake([text("VERDICT: CORRECT")]) as server:
        assert completer(section(server, provider))("grade this") == "VERDICT: CORRECT"
    assert server.exhausted == 0


@pytest.mark.parametrize("fake", [FakeAnthropic, FakeAzure, FakeGemini])
def test_preflight_probe_of_each_provider(fake):
    provider = {FakeAnthropic: "anthropic", FakeAzure: "azure", FakeGemini: "gemini"}[fake]
    with fake([]) as server:
        assert probe_all([ModelCheck("--model", section(server, provider))]) == []
    assert len(server.probes) == 1 and server.chat_requests == []


def test_preflight_names_an_anthropic_refusal_and_warns_of_overload():
    with FakeAnthropic([], key="another-key") as server:
        with pytest.raises(InputError, match=r"--model m \[llm.m\].*refused the preflight call: 401"):
            probe_all([ModelCheck("--model", section(server, "anthropic"))])
    with FakeAnthropic([], probe=anthropic_error(529, "overloaded_error", "Overloaded")) as server:
        warnings = probe_all([ModelCheck("--model", section(server, "anthropic", max_retries=0))])
    assert len(warnings) == 1 and "529 Overloaded" in warnings[0]


def test_preflight_refuses_an_azure_section_without_the_right_key(monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "wrong")
    with FakeAzure([]) as server, pytest.raises(InputError, match="refused the preflight call: 401"):
        probe_all([ModelCheck("--model", section(server, "azure"))])


def test_image_parts_become_anthropic_image_blocks():
    from harness.models.anthropic_messages import conversation

    parts = [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]
    assert conversation([{"role": "user", "content": parts}]) == [{"role": "user", "content": [
        {"type": "text", "text": "see"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}]}]


@pytest.mark.parametrize("value", [0, -5])
def test_a_max_tokens_below_one_is_refused_at_load_naming_it(value):
    """0 was sent as is by the AutoGen runner and silently became DEFAULT_MAX_TOKENS in the plain one."""
    config = {"llm": {"c": {"provider": "anthropic", "model": "claude-3-5-sonnet-20241022", "max_tokens": value}}}
    with pytest.raises(InputError) as refused:
        parse_section(config, "c")
    assert "[llm.c]" in str(refused.value) and "max_tokens" in str(refused.value)
