"""`harness run` against the fake OpenAI server: the cap on calls in flight and 429s, end to end.

Real sandboxes (Docker), real agent processes (one per instance, several at once with
--workers), the real OpenAI clients (the plain runner's OpenAIChat and AutoGen's
OpenAIChatCompletionClient); the model is tests/fakes/openai_server.py, which counts the
requests it is handling at once and can answer 429 with Retry-After.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers.e2e import explain, fake_config, harness, rows

pytestmark = pytest.mark.docker

AGENTS = {"autogen": "assistant", "plain": "plain"}


def containers_of(prefix: str) -> set[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--no-trunc", "--filter", "label=harness.managed=1",
                          "--format", '{{.ID}} {{.Label "harness.instance_id"}}'],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    fields = [line.split() for line in out.splitlines()]
    return {f[0] for f in fields if len(f) > 1 and f[1].startswith(prefix)}


@pytest.fixture
def prefix():
    """This test's instance ids start with it; at the end none of their containers may exist."""
    value = f"conc-{secrets.token_hex(4)}"
    yield value
    leftover = containers_of(value)
    if leftover:
        subprocess.run(["docker", "rm", "-f", "-v", *leftover], capture_output=True, timeout=60)
    assert not leftover, f"containers left behind: {leftover}"


def make_dataset(tmp_path: Path, prefix: str, n: int) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"instance_id": f"{prefix}-{i}", "question": "What is 3 + 4?",
                                        "answer": "7"}) + "\n" for i in range(n)))
    return path


def make_config(tmp_path: Path, base_url: str, *, max_connections: int | str, max_retries: int = 2) -> Path:
    return fake_config(tmp_path / "models.toml", base_url, max_retries=max_retries, max_connections=max_connections)


def harness_run(dataset: Path, config: Path, out: Path, *, agent: str, workers: int, extra: tuple[str, ...] = (),
                timeout: float = 240) -> subprocess.CompletedProcess:
    return harness("run", "--dataset", dataset, "--model", "fake", "--agent", agent, "--config", config,
                   "--output-dir", out, "--workers", workers, "--instance-timeout", 90, *extra, timeout=timeout)


# Each instance makes 8 calls: its answer has no <solution>, so the simulated user replies 7 times.
USER_REPLIES = 7
CALLS_PER_INSTANCE = USER_REPLIES + 1
THINKING = text("I am still working it out.", usage=(20, 5))


@pytest.mark.parametrize(("agent", "cap"), [("plain", 2), ("autogen", 2), ("plain", 4)])
def test_calls_in_flight_stay_within_max_connections(tmp_path, image, prefix, agent, cap):
    n = 4
    dataset, out = make_dataset(tmp_path, prefix, n), tmp_path / "out"
    with FakeOpenAI([], default=THINKING, delay=0.3) as server:
        proc = harness_run(dataset, make_config(tmp_path, server.base_url, max_connections=cap), out,
                           agent=AGENTS[agent], workers=n, extra=("--max-user-replies", str(USER_REPLIES)))
    assert proc.returncode == 0, explain(proc)
    got = rows(out)
    assert len(got) == n and all(r["status"] == "ok" for r in got), got
    assert all(r["usage"]["llm_calls"] == CALLS_PER_INSTANCE for r in got), [r["usage"] for r in got]
    assert len(server.chat_requests) == n * CALLS_PER_INSTANCE
    print(f"max in flight with max_connections={cap}, {agent}: {server.max_in_flight}")
    if cap == 2:
        assert server.max_in_flight == 2  # the 4 agent processes took turns, and did use both slots
    else:
        assert server.max_in_flight > 2  # the cap, not the setup, was what held them to 2 above


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_a_429_with_retry_after_is_retried_then_the_run_is_ok(tmp_path, image, prefix, agent):
    dataset, out = make_dataset(tmp_path, prefix, 1), tmp_path / "out"
    with FakeOpenAI([], default=text("<solution>7</solution>"), rate_limited=1, retry_after="1") as server:
        proc = harness_run(dataset, make_config(tmp_path, server.base_url, max_connections=2), out,
                           agent=AGENTS[agent], workers=1)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["error_kind"] is None and row["correct"] is True, row
    assert row["usage"]["llm_calls"] == 1
    chats = server.chat_requests
    assert [c["status"] for c in chats] == [429, 200]
    gap = chats[1]["at"] - chats[0]["at"]
    print(f"{agent}: retried {gap:.2f} s after the 429 (Retry-After: 1)")
    assert 0.95 <= gap < 3.0, gap


def test_a_429_beyond_the_retries_is_a_model_error(tmp_path, image, prefix):
    dataset, out = make_dataset(tmp_path, prefix, 1), tmp_path / "out"
    with FakeOpenAI([], default=text("<solution>7</solution>"), rate_limited=100, retry_after="0.2") as server:
        proc = harness_run(dataset, make_config(tmp_path, server.base_url, max_connections=2, max_retries=1), out,
                           agent="plain", workers=1)
    assert proc.returncode == 3, explain(proc)  # an instance errored
    (row,) = rows(out)
    assert row["status"] == "error" and row["error_kind"] == "model", row
    assert "429" in row["error"], row["error"]
    assert [c["status"] for c in server.chat_requests] == [429, 429]


@pytest.mark.parametrize("bad", ["0", "-1", "2.5", '"4"'])
def test_a_bad_max_connections_exits_2_before_any_container(tmp_path, prefix, bad):
    dataset, out = make_dataset(tmp_path, prefix, 1), tmp_path / "out"
    with FakeOpenAI([], default=text("<solution>7</solution>")) as server:
        proc = harness_run(dataset, make_config(tmp_path, server.base_url, max_connections=bad), out,
                           agent="plain", workers=1, timeout=60)
    assert proc.returncode == 2, explain(proc)
    assert "[llm.fake]" in proc.stderr and "max_connections" in proc.stderr, proc.stderr
    assert server.requests == []  # not even the preflight call
    assert not containers_of(prefix)
    assert not (out / "output.jsonl").exists()
