"""Search in the web archive (issue 22): every provider's exchanges recorded through SearchHTTP.send into
the run's WARC with the key REDACTED (the key's canary appears nowhere in the file), then served from it
with the same results in the same order and no request to the provider; an unrecorded search is a tool
result and a web_miss. The real WebSearch against each provider's fake server (tests/fakes/search_servers.py);
a whole recorded run then its replay (docker, slow) at the end."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from harness.environments.websearch.env import WebSearch
from harness.environments.websearch.settings import SearchSettings
from harness.traces import Tracer
from tests.fakes.search_servers import RESULTS, FakeSearch

PROVIDERS = ("tavily", "serper", "brave", "searxng")


def _settings(provider: str, server: FakeSearch, **extra) -> SearchSettings:
    return SearchSettings(provider=provider, base_url=server.base_url, backoff=0.01, max_retries=2,
                          api_key_env=None if provider == "searxng" else "TEST_SEARCH_KEY", **extra)


def _events(trace: Path) -> list[dict]:
    return [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []


def _records(archive: Path) -> list:
    with archive.open("rb") as fh:
        return [(r.rec_type, dict(r.rec_headers.headers), r.http_headers.headers if r.http_headers else [],
                 r.content_stream().read()) for r in ArchiveIterator(fh)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_searches_are_recorded_without_the_key_and_replayed_in_order_without_the_provider(provider, tmp_path,
                                                                                          monkeypatch):
    canary = "canary-" + os.urandom(8).hex()
    monkeypatch.setenv("TEST_SEARCH_KEY", canary)
    archive = tmp_path / "rec" / "web" / "search.warc.gz"
    with FakeSearch(provider, key=canary, script=[("status", 503)]) as server:
        record = WebSearch(_settings(provider, server, web_record=str(archive)), Tracer(tmp_path / "rec.jsonl"),
                           who="q1/2")
        live = [record.search("teak bench", 3)]  # a 503 then the results: both exchanges recorded
        server.results = list(reversed(RESULTS))  # another query, other results in another order
        live.append(record.search("bench care", 3))
        asked = len(server.requests)
        assert asked == 3 and "Teak Bench" in live[0] and live[0] != live[1]

        raw = gzip.decompress(archive.read_bytes())
        assert canary.encode() not in raw  # the key never reaches the archive
        found = _records(archive)
        assert [kind for kind, *_ in found] == ["request", "response"] * 3
        for kind, warc, http_headers, _ in found:
            assert warc["WARC-Harness-Instance"] == "q1/2" and warc["WARC-Harness-Source"] == "search"
            if kind == "request" and provider != "searxng":
                secret = {"tavily": "authorization", "serper": "x-api-key", "brave": "x-subscription-token"}[provider]
                assert dict((k.lower(), v) for k, v in http_headers)[secret] == "REDACTED"
            if kind == "response":
                assert "WARC-Harness-Key" in warc and set(json.loads(warc["WARC-Harness-Timing"])) == {"start", "end"}
        assert [json.loads(body).get("error") for kind, _, _, body in found if kind == "response"][0] == "status 503"

        # Replay: no key set, the provider still up but never asked; the same text, in the same order.
        monkeypatch.delenv("TEST_SEARCH_KEY")
        trace = tmp_path / "replay.jsonl"
        replay = WebSearch(_settings(provider, server, web_replay=(str(archive),)), Tracer(trace), who="q1/1")
        again = [replay.search("teak bench", 3), replay.search("bench care", 3)]
        missed = replay.search("garden chair", 3)  # never recorded
        assert len(server.requests) == asked
    assert again == live
    assert missed.startswith("Error: this run replays a recorded web (--web-replay)") and "never" in missed
    archived = [e for e in _events(trace) if e["env"] == "web_archive"]
    assert [e["action"] for e in archived] == ["web_hit", "web_hit", "web_hit", "web_miss"]
    assert all(e["args"]["source"] == "search" for e in archived)
    searches = [e for e in _events(trace) if e["env"] == "websearch"]
    assert [e["outcome"] for e in searches] == ["ok", "ok", "error"]


def test_agent_processes_of_one_run_append_to_one_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_SEARCH_KEY", "test-key")
    archive = tmp_path / "web" / "search.warc.gz"
    with FakeSearch("tavily") as server:
        for who in ("a/1", "b/1"):  # each agent process has its own WebSearch and file handle
            WebSearch(_settings("tavily", server, web_record=str(archive)), Tracer(tmp_path / f"{who[0]}.jsonl"),
                      who=who).search(f"query {who}")
    tags = [warc["WARC-Harness-Instance"] for kind, warc, *_ in _records(archive) if kind == "response"]
    assert tags == ["a/1", "b/1"]


def _tool_results(out: Path, row: dict) -> list[str]:
    from tests.helpers.e2e import trace

    return [str(e.get("content", "")) for e in trace(out, row) if e["type"] == "tool_result"]


@pytest.mark.docker
@pytest.mark.slow
def test_a_recorded_runs_searches_replay_without_the_provider_or_its_key(tmp_path):
    """--web-record with a hosted provider (tavily's fake server, a canary key): the key is in no file of the
    run; --web-replay with the server gone and no key: the agent reads the same results."""
    from tests.helpers.e2e import explain, harness, replay_dataset, rows
    from tests.test_web_archive import SMOKE

    canary = "tvly-canary-" + os.urandom(8).hex()
    turns = [{"tool_calls": [{"name": "web_search", "arguments": {"query": "teak bench", "max_results": 3}}]},
             {"content": "<solution>FUR-101</solution>"}]
    data, config = replay_dataset(tmp_path / "data", [("q0", "Which product is the teak bench?", "FUR-101")],
                                  lambda iid: turns)
    recorded, replayed = tmp_path / "recorded", tmp_path / "replayed"
    with FakeSearch("tavily", key=canary) as server:
        config.write_text(config.read_text() + f'\n[search.tavily]\nbase_url = "{server.base_url}"\n'
                                               'api_key_env = "TEST_TAVILY_KEY"\n')
        proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--website", SMOKE / "website",
                       "--web-record", "--search", "tavily", "--output-dir", recorded, env={"TEST_TAVILY_KEY": canary})
        assert proc.returncode == 0, explain(proc)
        assert len(server.requests) == 2  # the run's preflight search (not recorded), then the agent's
        assert [r["headers"].get("x-harness-preflight") for r in server.requests] == ["1", None]
    (row,) = rows(recorded)
    assert row["correct"] is True and row["env_outcomes"]["websearch"] == {"ok": 1}, row
    assert (recorded / "web" / "search.warc.gz").is_file()
    for path in recorded.rglob("*"):  # the secret canary: in no file the run wrote, the archives unpacked
        if path.is_file():
            data_ = path.read_bytes()
            assert canary.encode() not in (gzip.decompress(data_) if path.suffix == ".gz" else data_), path

    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--web-replay", recorded,
                   "--search", "tavily", "--output-dir", replayed)  # no TEST_TAVILY_KEY, no server
    assert proc.returncode == 0, explain(proc)
    (again,) = rows(replayed)
    assert again["answer"] == row["answer"] and again["env_outcomes"]["web_archive"] == {"hit": 1}, again
    assert _tool_results(replayed, again) == _tool_results(recorded, row)
    assert "Teak Bench - Northwind" in _tool_results(replayed, again)[0]


@pytest.mark.docker
@pytest.mark.slow
def test_the_smoke_site_search_replays_from_the_recorded_index_with_the_site_gone(tmp_path):
    """The `site` provider: a --web-record run keeps its crawled index in web/; the replay (no --website,
    no --search) searches it and finds the same notice, with no divergence."""
    from tests.helpers.e2e import explain, harness, rows
    from tests.test_web_archive import SMOKE

    search_id = "186b065e-32f9-5511-b2ad-03adaac76864"
    recorded, replayed = tmp_path / "recorded", tmp_path / "replayed"
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--website", SMOKE / "website", "--ids",
                   search_id, "--output-dir", recorded, "--web-record", "--fail-on-divergence")
    assert proc.returncode == 0, explain(proc)
    assert (recorded / "web" / "search-site-index").is_dir() and not (recorded / "search-site-index").exists()
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--ids", search_id, "--output-dir", replayed,
                   "--web-replay", recorded, "--fail-on-divergence")
    assert proc.returncode == 0, explain(proc)
    (row,), (again,) = rows(recorded), rows(replayed)
    assert (again["answer"], again["correct"]) == (row["answer"], row["correct"]) == ("HRC-2317", True)
    assert _tool_results(replayed, again)[0] == _tool_results(recorded, row)[0]  # the search's results
