"""The search provider's preflight (environments/websearch/probe.py): one real search before any container,
against each provider's fake server (tests/fakes/search_servers.py), also when it trickles or answers
something else; and a provider that trickles its answer is cut at the request's timeout."""

from __future__ import annotations

import socket

import pytest

from harness.environments.websearch.env import SearchUnavailable, WebSearch
from harness.environments.websearch.probe import PROBE_QUERY, probe_search
from harness.environments.websearch.settings import SearchSettings
from harness.errors import InputError
from harness.traces import Tracer
from tests.fakes.search_servers import FakeSearch
from tests.helpers.e2e import explain, harness, replay_dataset
from tests.helpers.wait import ends_within

PROVIDERS = ("tavily", "serper", "brave", "searxng")


def settings(provider: str, base_url: str, monkeypatch, key: str = "test-key", **extra) -> SearchSettings:
    monkeypatch.setenv("TEST_SEARCH_KEY", key)
    return SearchSettings(provider=provider, base_url=base_url,
                          api_key_env=None if provider == "searxng" else "TEST_SEARCH_KEY", **extra)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_preflight_makes_one_marked_search_and_passes_a_working_provider(provider, monkeypatch):
    with FakeSearch(provider) as server:
        assert probe_search(settings(provider, server.base_url, monkeypatch)) is None
    (request,) = server.requests
    assert request["headers"]["x-harness-preflight"] == "1"
    asked = (request["json"] or {}).get("query") or (request["json"] or {}).get("q") or request["query"].get("q")
    assert asked == PROBE_QUERY


@pytest.mark.parametrize("provider", ["tavily", "serper", "brave"])
def test_a_refused_key_is_exit_2_naming_the_provider_and_the_variable(provider, monkeypatch):
    with FakeSearch(provider, key="right") as server, pytest.raises(InputError) as caught:
        probe_search(settings(provider, server.base_url, monkeypatch, key="wrong"))
    assert str(caught.value).startswith(f"--search {provider} ({server.base_url}) refused the key from TEST_SEARCH_KEY")
    assert len(server.requests) == 1  # never retried


@pytest.mark.parametrize(("script", "expect"), [
    (("query",), "refused the preflight's search (check its base_url and options): HTTP 400"),
    (("status", 402), "the key's quota is used up: HTTP 402"),
    (("status", 404), "refused the preflight's search"),
])
def test_a_provider_that_cannot_work_for_any_instance_is_exit_2(script, expect, monkeypatch):
    with FakeSearch("tavily", key="test-key", script=[script]) as server, pytest.raises(InputError) as caught:
        probe_search(settings("tavily", server.base_url, monkeypatch))
    assert expect in str(caught.value), caught.value


@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_or_failing_provider_is_a_warning(status, monkeypatch):
    with FakeSearch("serper", script=[("status", status)]) as server:
        warning = probe_search(settings("serper", server.base_url, monkeypatch))
    assert warning is not None and warning.startswith(f"warning: --search serper ({server.base_url}) is busy")
    assert f"HTTP {status}" in warning and len(server.requests) == 1


def test_no_answer_an_answer_that_is_not_json_or_one_without_end_is_exit_2(monkeypatch):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(InputError, match=r"^--search searxng \(http://127.0.0.1:\d+\): the search preflight got no "
                                         r"answer: ConnectError"):
        probe_search(settings("searxng", f"http://127.0.0.1:{port}", monkeypatch))
    with FakeSearch("searxng", script=[("text", "text/html", b"<html>a login page</html>")]) as page, \
            pytest.raises(InputError, match="the preflight's answer is not searxng's JSON: '<html>a login"):
        probe_search(settings("searxng", page.base_url, monkeypatch))
    with FakeSearch("searxng", script=[("trickle",)]) as trickling, \
            pytest.raises(InputError, match="was still coming after 1 s"):
        ends_within(lambda: probe_search(settings("searxng", trickling.base_url, monkeypatch, timeout=1.0)), 15,
                    "the preflight of a trickling provider")


def test_nothing_is_asked_of_an_offline_none_or_replayed_search(monkeypatch):
    with FakeSearch("tavily") as server:
        for given in (SearchSettings(provider="none"), SearchSettings(provider="site", base_url=server.base_url),
                      settings("tavily", server.base_url, monkeypatch, web_replay=("/nowhere/search.warc.gz",))):
            assert probe_search(given) is None
    assert server.requests == []


def test_a_search_whose_answer_trickles_is_cut_at_its_timeout_an_outage(tmp_path, monkeypatch):
    """Before, each byte arriving within the read timeout kept the search reading up to MAX_ANSWER_BYTES
    (8 MB at a byte per 0.2 s: about 19 days); now a request takes its timeout in all, then is retried."""
    with FakeSearch("searxng", script=[("trickle",), ("trickle",)]) as trickling:
        search = WebSearch(settings("searxng", trickling.base_url, monkeypatch, timeout=1.0, max_retries=1,
                                    backoff=0.01), Tracer(tmp_path / "t.jsonl"))
        with pytest.raises(SearchUnavailable, match="was still coming after 1 s"):
            ends_within(lambda: search.search("teak"), 20, "a search of a trickling provider")
    assert len(trickling.requests) == 2  # retried once, then an outage


def test_a_run_with_a_refused_search_key_ends_at_the_preflight_before_any_container(tmp_path):
    data, config = replay_dataset(tmp_path / "data", [("q", "Where?", "here")],
                                  lambda iid: [{"content": "<solution>here</solution>"}])
    with FakeSearch("brave", key="right") as server:
        config.write_text(config.read_text() + f'[search.brave]\nbase_url = "{server.base_url}"\n'
                                               'api_key_env = "TEST_BRAVE_KEY"\n')
        proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--search", "brave",
                       "--output-dir", tmp_path / "out", env={"TEST_BRAVE_KEY": "wrong"})
    assert proc.returncode == 2, explain(proc)
    said = f"--search brave ({server.base_url}) refused the key from TEST_BRAVE_KEY: HTTP 422"
    assert said in proc.stderr, proc.stderr
    assert "SUBSCRIPTION_TOKEN_INVALID" in proc.stderr or "subscription token is invalid" in proc.stderr
    out = tmp_path / "out"
    assert not out.exists() or list(out.iterdir()) == [], list(out.iterdir())  # no row, no run.json
    assert len(server.requests) == 1
