"""The closed set of error kinds, and retries decided by kind: only retryable (infra) errors get
another attempt on a fresh sandbox; harness bugs, agent crashes and model failures are recorded once.

The end-to-end tests call `run_instance` in-process (real Docker sandboxes, the real agent process)
with providers and runners from tests/helpers/runners.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

import harness.runner.instance as instance_mod
from harness.agents.contract import AgentResult, Limits
from harness.datasets.model import Instance
from harness.errors import (
    ERROR_KINDS,
    AgentError,
    EngineUnavailable,
    HarnessError,
    InfraError,
    InputError,
    LimitExceeded,
    ModelError,
    SandboxDied,
    SandboxFileNotFound,
    ScorerError,
    kind_of,
)
from harness.models.config import ModelSection
from harness.results.model import ResultRow
from harness.runner.instance import RunSettings, run_instance
from harness.scoring import get_scorer
from harness.settings import settings
from harness.traces import ErrorEvent, read_trace
from tests.helpers.e2e import REPO
from tests.helpers.runners import CountingProvider, FlakyProvider

SOLVE = [{"tool_calls": [{"name": "run_python", "arguments": {"code": "print(6*7)"}}],
          "usage": {"prompt_tokens": 50, "completion_tokens": 5}},
         {"content": "<solution>42</solution>", "usage": {"prompt_tokens": 70, "completion_tokens": 3}}]


# ------------------------------------------------------------------ the closed set
def test_the_kinds_are_a_closed_set():
    assert set(ERROR_KINDS) == {"input", "infra", "agent", "model", "scorer", "harness"}


@pytest.mark.parametrize("kind", ["bogus", "timeout", "Infra", "", "limit"])
def test_a_row_refuses_a_kind_outside_the_set(kind):
    with pytest.raises(ValidationError, match="error_kind"):
        ResultRow(instance_id="x", status="error", error_kind=kind, error="?")
    with pytest.raises(ValidationError, match="error_kind"):
        AgentResult(error_kind=kind)
    with pytest.raises(ValidationError):  # nor does one sneak in from a stored row
        ResultRow.model_validate_json(json.dumps({"instance_id": "x", "status": "error", "error_kind": kind}))


@pytest.mark.parametrize("kind", ERROR_KINDS)
def test_a_row_takes_every_kind_in_the_set(kind):
    assert ResultRow(instance_id="x", status="error", error_kind=kind).error_kind == kind
    assert AgentResult(error_kind=kind).error_kind == kind


def test_errors_carry_their_kind_and_only_infra_is_retryable():
    cases = {InputError: "input", InfraError: "infra", SandboxDied: "infra", EngineUnavailable: "infra",
             AgentError: "agent", ModelError: "model", ScorerError: "scorer", HarnessError: "harness",
             SandboxFileNotFound: "agent"}
    for cls, kind in cases.items():
        assert kind_of(cls("x")) == kind == cls.kind, cls
        assert cls.retryable is (kind == "infra"), cls
    assert kind_of(LimitExceeded("max_steps", "3 calls")) == "agent" and not LimitExceeded.retryable
    assert kind_of(RuntimeError("any other exception in the agent's process")) == "agent"


def test_model_client_exceptions_are_model_errors():
    import httpx
    import openai

    request = httpx.Request("POST", "http://model.invalid/v1/chat/completions")
    assert kind_of(openai.APIConnectionError(request=request)) == "model"
    assert kind_of(httpx.ConnectError("refused", request=request)) == "model"


# ------------------------------------------------------------------ end to end: retried or not
@pytest.fixture
def no_backoff(monkeypatch):
    monkeypatch.setenv("HARNESS_RETRY_BACKOFF", "0")
    settings.cache_clear()
    yield
    settings.cache_clear()


@pytest.fixture
def in_repo(monkeypatch):
    """Agent processes import tests.helpers.* as a user's own module: from the repository root."""
    monkeypatch.chdir(REPO)


def make_settings(tmp_path: Path, run_id: str, image: str, provider, *, agent: str = "plain",
                  turns: list[dict] | None = None, max_retries: int = 2) -> tuple[Instance, RunSettings]:
    inst = Instance(instance_id=f"{run_id}-task", question="What is 6 times 7?", answer="42", root=tmp_path)
    model = ModelSection(name="rec", kind="replay", path=str(tmp_path / "unused.jsonl"))
    return inst, RunSettings(run_id=run_id, image=image, agent=agent, model=model,
                             limits=Limits(max_steps=5, instance_timeout=120), output_dir=tmp_path / "out",
                             provider=provider, scorers=[get_scorer("gaia")], max_retries=max_retries,
                             replay={inst.instance_id: SOLVE if turns is None else turns})


def error_events(settings_: RunSettings, row: ResultRow) -> list[ErrorEvent]:
    return [e for e in read_trace(settings_.output_dir / row.trace) if isinstance(e, ErrorEvent)]


@pytest.mark.docker
def test_a_harness_bug_is_recorded_once_with_its_traceback(tmp_path, image, run_id, monkeypatch, no_backoff):
    def broken_request(*args, **kwargs):
        raise KeyError("a bug in the harness's own request building")

    monkeypatch.setattr(instance_mod, "_request", broken_request)
    provider = CountingProvider()
    inst, settings_ = make_settings(tmp_path, run_id, image, provider)
    row = run_instance(inst, settings_).row
    assert row.status == "error" and row.error_kind == "harness", row
    assert row.attempt == 1 and provider.starts == [1]  # not retried
    assert "KeyError" in row.error and "request building" in row.error
    assert row.correct is False and row.scores == {}
    (event,) = error_events(settings_, row)
    assert event.kind == "harness" and "request building" in event.message
    assert "Traceback" in event.traceback and "broken_request" in event.traceback
    assert provider.find(run_id) == []  # its sandbox was removed on the way out


@pytest.mark.docker
def test_a_retryable_infra_error_gets_a_fresh_attempt(tmp_path, image, run_id, no_backoff):
    provider = FlakyProvider(failures=1)
    inst, settings_ = make_settings(tmp_path, run_id, image, provider)
    row = run_instance(inst, settings_).row
    assert row.status == "ok" and row.error_kind is None, row
    assert row.attempt == 2 and provider.starts == [1, 2]
    assert row.correct is True and row.answer == "42" and row.tool_calls == ["run_python"]
    assert row.trace.endswith("-a2.jsonl") and row.sandbox and "-a2-" in row.sandbox
    assert row.usage.llm_calls == 2  # the failed attempt never reached the model
    assert provider.find(run_id) == []


def test_infra_errors_stop_after_max_retries(tmp_path, no_backoff):
    provider = FlakyProvider(failures=99)  # never starts a container
    inst, settings_ = make_settings(tmp_path, "test-never-starts", "no-image", provider, max_retries=2)
    row = run_instance(inst, settings_).row
    assert row.status == "error" and row.error_kind == "infra" and "engine hiccup" in row.error
    assert row.attempt == 3 and provider.starts == [1, 2, 3]
    assert row.correct is False


@pytest.mark.docker
def test_an_agent_crash_is_recorded_once(tmp_path, image, run_id, in_repo, no_backoff):
    provider = CountingProvider()
    inst, settings_ = make_settings(tmp_path, run_id, image, provider, agent="tests.helpers.runners:CrashingRunner")
    row = run_instance(inst, settings_).row
    assert row.status == "error" and row.error_kind == "agent", row
    assert "RuntimeError" in row.error and "tripped over its own code" in row.error
    assert row.attempt == 1 and provider.starts == [1]  # not retried, though two retries were allowed
    (event,) = error_events(settings_, row)
    assert event.kind == "agent" and "Traceback" in event.traceback
    assert 'tests/helpers/runners.py", line' in event.traceback and "in turn" in event.traceback
    assert provider.find(run_id) == []


@pytest.mark.docker
def test_a_model_error_is_recorded_once(tmp_path, image, run_id, no_backoff):
    provider = CountingProvider()
    inst, settings_ = make_settings(tmp_path, run_id, image, provider, turns=[])  # nothing recorded to play
    row = run_instance(inst, settings_).row
    assert row.status == "error" and row.error_kind == "model", row
    assert "no recorded turns left" in row.error
    assert row.attempt == 1 and provider.starts == [1]
    assert provider.find(run_id) == []
