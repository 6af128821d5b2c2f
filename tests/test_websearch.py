"""web_search (issue 23 items 1, 3): each provider's wire format against its fake server, typed errors,
the per-run cache, the leakage guard, the run's choice of provider. The site provider over the real offline
site and the browser's guard run in real sandboxes (docker marker)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from harness.environments.web import WebEnv
from harness.environments.websearch.env import SearchRefused, SearchUnavailable, WebSearch
from harness.environments.websearch.guard import DEFAULT_BLOCK, Guard, block_list
from harness.environments.websearch.settings import SearchSettings, check_key, resolve
from harness.environments.websearch.site import SiteIndex, index_site
from harness.errors import InputError
from harness.sandbox.contract import SandboxSpec
from harness.traces import Tracer
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.fakes.search_servers import FakeSearch
from tests.helpers.e2e import explain, fake_config, harness, out_dir, replay_dataset, rows, trace

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "datasets" / "gaia-smoke"
PROVIDERS = ("tavily", "serper", "brave", "searxng")


def _search(provider: str, server: FakeSearch, tmp_path: Path, monkeypatch, *, key: str = "test-key",
            cache: bool = False, **extra) -> tuple[WebSearch, Path]:
    monkeypatch.setenv("TEST_SEARCH_KEY", key)
    settings = SearchSettings(provider=provider, base_url=server.base_url,
                              api_key_env=None if provider == "searxng" else "TEST_SEARCH_KEY", backoff=0.01,
                              cache_dir=str(tmp_path / "cache") if cache else None, **extra)
    trace = tmp_path / "trace.jsonl"
    return WebSearch(settings, Tracer(trace)), trace


def _events(trace: Path) -> list[dict]:
    return [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_provider_speaks_its_wire_format_and_results_are_numbered_and_guarded(provider, tmp_path, monkeypatch):
    with FakeSearch(provider) as server:
        search, trace = _search(provider, server, tmp_path, monkeypatch)
        shown = search.search("teak bench", 3)
    (request,) = server.requests
    if provider == "tavily":
        assert request["method"] == "POST" and request["headers"]["authorization"] == "Bearer test-key"
        assert request["json"] == {"query": "teak bench", "max_results": 3}
    elif provider == "serper":
        assert request["headers"]["x-api-key"] == "test-key" and request["json"] == {"q": "teak bench", "num": 3}
    elif provider == "brave":
        assert request["method"] == "GET" and request["headers"]["x-subscription-token"] == "test-key"
        assert request["query"] == {"q": "teak bench", "count": "3"}
    else:
        assert request["query"] == {"q": "teak bench", "format": "json"} and "authorization" not in request["headers"]
    assert "[1] Teak Bench - Northwind (2023-05-01)\n    http://shop.gaia.test/product/FUR-101" in shown
    assert "[2] Bench care\n    https://example.org/bench-care\n    Oil it twice a year." in shown
    assert "huggingface.co" not in shown and "1 result(s) withheld by the leakage guard" in shown
    events = _events(trace)
    blocked = [e for e in events if e["env"] == "guard"]
    (done,) = [e for e in events if e["env"] == "websearch"]
    assert done["outcome"] == "ok" and done["args"]["provider"] == provider and done["args"]["query"] == "teak bench"
    assert done["urls"] == ["http://shop.gaia.test/product/FUR-101", "https://example.org/bench-care"]
    assert blocked[0]["outcome"] == "blocked" and "gaia-benchmark" in blocked[0]["args"]["url"]


@pytest.mark.parametrize("provider", ("tavily", "serper", "brave"))
def test_a_refused_key_is_a_model_error_that_stops_the_search(provider, tmp_path, monkeypatch):
    with FakeSearch(provider, key="the-right-one") as server:
        search, trace = _search(provider, server, tmp_path, monkeypatch, key="a-wrong-one")
        with pytest.raises(SearchRefused, match="refused the key from TEST_SEARCH_KEY") as caught:
            search.search("teak bench")
    assert caught.value.kind == "model" and not caught.value.retryable
    assert len(server.requests) == 1  # not retried
    assert [e["outcome"] for e in _events(trace)] == ["error"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refused_query_is_a_tool_result_the_agent_reads(provider, tmp_path, monkeypatch):
    with FakeSearch(provider, script=[("query",)]) as server:
        search, trace = _search(provider, server, tmp_path, monkeypatch)
        shown = search.search("teak bench")
    assert shown.startswith(f"Error: {provider} refused the query: HTTP ")
    assert _events(trace)[0]["outcome"] == "error"


def test_an_outage_is_retried_with_backoff_then_an_infra_error(tmp_path, monkeypatch):
    script = [("status", 503), ("status", 429, {"Retry-After": "0"}), ("status", 502)]
    with FakeSearch("tavily", script=script) as server:
        search, _ = _search("tavily", server, tmp_path, monkeypatch, max_retries=3)
        assert "Teak Bench" in search.search("teak bench")
    assert len(server.requests) == 4
    with FakeSearch("serper", script=[("status", 500)] * 3) as server:
        search, _ = _search("serper", server, tmp_path, monkeypatch, max_retries=2)
        with pytest.raises(SearchUnavailable, match="did not answer after 2 retries") as caught:
            search.search("teak bench")
    assert caught.value.kind == "infra" and caught.value.retryable and len(server.requests) == 3


def test_rate_limited_after_the_retries_is_a_used_up_quota(tmp_path, monkeypatch):
    with FakeSearch("brave", script=[("status", 429, {"Retry-After": "0"})] * 2) as server:
        search, _ = _search("brave", server, tmp_path, monkeypatch, max_retries=1)
        with pytest.raises(SearchRefused, match="still rate-limited"):
            search.search("teak bench")


def test_searches_are_cached_per_run_directory_by_provider_query_and_options(tmp_path, monkeypatch):
    with FakeSearch("tavily") as server:
        search, trace = _search("tavily", server, tmp_path, monkeypatch, cache=True)
        first = search.search("teak bench", 2)
        again = WebSearch(search.settings, Tracer(trace)).search("teak bench", 2)  # another agent process
        search.search("teak bench", 3)  # other options: asked again
    assert first == again and len(server.requests) == 2
    assert [e.get("cached") for e in _events(trace) if e["env"] == "websearch"] == [False, True, False]
    with FakeSearch("tavily") as server:
        search, _ = _search("tavily", server, tmp_path / "off", monkeypatch, cache=False)
        search.search("teak bench")
        search.search("teak bench")
    assert len(server.requests) == 2


def test_the_guard_blocks_gaia_copies_and_given_patterns_only():
    guard = Guard(block_list(["example.org/answers", "*.leak.test/*"]))
    for url in ("https://huggingface.co/datasets/gaia-benchmark/GAIA/resolve/main/2023/validation/metadata.jsonl",
                "https://www.huggingface.co/spaces/gaia-benchmark/leaderboard", "hf.co/datasets/gaia-benchmark/GAIA",
                "https://huggingface.co/datasets/evatan/GAIA/blob/main/README.md",
                "https://datasets-server.huggingface.co/rows?dataset=gaia-benchmark%2FGAIA&config=2023_all",
                "https://hf-mirror.com/datasets/gaia-benchmark/GAIA", "https://example.org/answers/q1",
                "http://a.leak.test/x"):
        assert guard.blocks(url) is not None, url
    for url in ("https://huggingface.co/datasets/other/data", "https://example.org/answersheet",
                "https://en.wikipedia.org/wiki/Gaia", "https://arxiv.org/abs/2311.12983", "http://shop.gaia.test/"):
        assert guard.blocks(url) is None, url
    assert block_list(["none", "x.test"]) == ("x.test",) and block_list(None) == DEFAULT_BLOCK


def test_the_runs_provider_and_what_it_refuses(monkeypatch):
    assert resolve(None, None, False, None, website=False).provider == "none"
    assert resolve(None, None, False, None, website=True).provider == "site"
    chosen = resolve(None, None, True, {"provider": "brave", "max_results": 7, "brave": {"options": {"country": "de"}}},
                     website=True)
    assert (chosen.provider, chosen.max_results, chosen.options, chosen.cache) == ("brave", 7, {"country": "de"}, False)
    assert chosen.api_key_env == "BRAVE_API_KEY" and chosen.base_url == "https://api.search.brave.com"
    with pytest.raises(InputError, match="--search site .*needs --website"):
        resolve("site", None, False, None, website=False)
    with pytest.raises(InputError, match=r"\[search.searxng\] base_url"):
        resolve("searxng", None, False, None, website=False)
    with pytest.raises(InputError, match="--search bing: unknown provider"):
        resolve("bing", None, False, None, website=False)
    with pytest.raises(InputError, match=r"\[search\]"):
        resolve(None, None, False, {"tavily": {"api_key": "sk-inline"}}, website=False)  # keys by variable only
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(InputError, match="TAVILY_API_KEY is not set"):
        check_key(resolve("tavily", None, False, None, website=False))


@pytest.mark.docker
def test_site_search_over_the_real_offline_site_and_the_browsers_guard(provider, image, run_id, tmp_path):
    """The site is crawled from a sandbox on its network and indexed on the host; the browser in another
    sandbox is kept from a blocked page, by visit_url and by a click that lands on it."""
    trace = tmp_path / "t.jsonl"

    async def browse(sb):
        web = WebEnv(sb, Tracer(trace), action_timeout=10)
        web.guard = Guard(("shop.gaia.test/about",))
        try:
            return [await web.visit("http://shop.gaia.test/about"), await web.visit("http://shop.gaia.test/"),
                    await web.click("About us"), await web.find("Edith")]
        finally:
            await web.close()

    with provider.website(SMOKE / "website", image, run_id) as policy:
        pages, passages, withheld = index_site(provider, SandboxSpec(image=image, run_id=run_id, instance_id="crawl",
                                                                     network=policy), "shop.gaia.test",
                                               tmp_path / "index", DEFAULT_BLOCK)
        with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="guarded", network=policy)) as sb:
            shown = asyncio.run(browse(sb))
    # every product page, the catalog's pages, reports, about, the CSV; the default guard withholds none of them
    assert pages >= 30 and passages >= pages and withheld == 0
    hits = SiteIndex(tmp_path / "index").search("teak bench warranty", 3)
    assert hits[0].url == "http://shop.gaia.test/product/FUR-101" and "Warranty 3 years" in hits[0].snippet
    search = WebSearch(SearchSettings(provider="site", site_index=str(tmp_path / "index")), Tracer(trace))
    assert "[1] Teak Bench\n    http://shop.gaia.test/product/FUR-101" in search.search("teak bench", 2)
    assert "http://shop.gaia.test/files/supplier-deliveries-2023.csv" in search.search("Aqua Flow GmbH delivery", 5)
    blocked_visit, home, blocked_click, after = shown
    assert "blocked by the leakage guard" in blocked_visit and "Edith" not in blocked_visit
    assert "Northwind Garden Supply" in home
    assert "http://shop.gaia.test/about is blocked by the leakage guard" in blocked_click
    assert after == "'Edith' not found on about:blank"  # the page's text was never read
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [e["args"]["source"] for e in events if e["env"] == "guard"] == ["browser", "browser"]
    assert [e["outcome"] for e in events if e["env"] == "web"][:3] == ["blocked", "ok", "blocked"]


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["plain", "assistant"])
def test_both_runners_search_end_to_end_and_the_key_never_enters_the_sandbox(agent, tmp_path, image):
    """A scripted model calls web_search (tavily, its fake server) and then looks for the key inside the
    sandbox: the results reach the model, the search is counted in the row, the key reached only the
    search server (secret canary, as tests/faults/test_holds.py does for the model's key)."""
    canary = "tvly-canary-" + os.urandom(8).hex()
    look = ("env; cat /proc/1/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n'; "
            "grep -rsl " + canary[:16] + " /workspace /tmp /proc/*/environ 2>/dev/null; echo done")
    script = [tool_calls(("web_search", {"query": "teak bench", "max_results": 3})),
              tool_calls(("run_shell", {"command": look})), text("<solution>0</solution>")]
    data, _ = replay_dataset(tmp_path / "data", [("q0", "What is 0?", "0")], lambda iid: [])
    out = out_dir(tmp_path)
    with FakeOpenAI(script) as model, FakeSearch("tavily", key=canary) as search:
        config = fake_config(tmp_path / "fake.toml", model.base_url)
        config.write_text(config.read_text() + f'\n[search.tavily]\nbase_url = "{search.base_url}"\n'
                                               'api_key_env = "TEST_TAVILY_KEY"\n')
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", agent, "--search", "tavily", env={"TEST_TAVILY_KEY": canary})
        sent_to_model = json.dumps(model.chat_requests)
        (probe,) = model.probes
    assert proc.returncode == 0, explain(proc)
    # The preflight's request offers web_search too, as the agent's own first call does (agents/dry.py).
    assert "web_search" in {t["function"]["name"] for t in probe["json"]["tools"]}
    assert probe["json"]["tools"] == model.chat_requests[0]["json"]["tools"]
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is True, row
    assert row["env_outcomes"]["websearch"] == {"ok": 1} and row["env_outcomes"]["guard"] == {"blocked": 1}
    # the run's preflight search (environments/websearch/probe.py), then the agent's: the key only there
    assert [(r["headers"]["authorization"], r["headers"].get("x-harness-preflight")) for r in search.requests] == [
        (f"Bearer {canary}", "1"), (f"Bearer {canary}", None)]
    assert "http://shop.gaia.test/product/FUR-101" in sent_to_model  # the results reached the model
    assert "gaia-benchmark/GAIA" not in sent_to_model  # the guard withheld the benchmark's own page
    events = trace(out, row)
    shown = "\n".join(str(e.get("content", "")) for e in events if e["type"] == "tool_result")
    assert "done" in shown and canary not in shown and canary not in (out / row["trace"]).read_text()
    report = json.loads((out / "report.json").read_text())
    assert report["env_outcomes"]["websearch"] == {"ok": 1} and report["env_outcomes"]["guard"] == {"blocked": 1}


@pytest.mark.parametrize("url", ["localhost:8888", "searx.local", "ftp://searx.local", "http://", ""])
def test_a_providers_base_url_that_is_no_http_url_is_refused_at_load(url, tmp_path):
    """Exit 2 naming the TOML key, before any container (else every search failed as an outage, retried)."""
    config = tmp_path / "s.toml"
    config.write_text(f'[search]\nprovider = "searxng"\n[search.searxng]\nbase_url = "{url}"\n')
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": "q", "question": "Where?", "answer": "here"}) + "\n")
    proc = harness("run", "--dataset", data, "--model", "replay", "--config", config, "--output-dir", tmp_path / "out")
    assert proc.returncode == 2, explain(proc)
    assert "searxng.base_url" in proc.stderr and "http(s)://HOST" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_guard_reads_a_percent_encoded_or_doubled_path_as_the_server_does():
    """A server decodes %2D to '-' and most collapse '//': the same dataset page, so the same block."""
    guard = Guard(block_list(["example.org/answers"]))
    for url in ("https://huggingface.co/datasets/gaia%2Dbenchmark/GAIA", "https://huggingface.co/datasets/gaia%2dbenchmark",
                "https://huggingface.co//datasets/gaia-benchmark/GAIA", "https://huggingface.co/%64atasets/evatan/GAIA",
                "https://example.org/%61nswers/q1"):
        assert guard.blocks(url) is not None, url
    assert guard.blocks("https://example.org/answers%20sheet") is None


def test_the_guard_reads_a_unicode_host_and_its_idna_form_as_one_host():
    """A browser navigates `bücher.example` as `xn--bcher-kva.example`; before, a pattern in one form let
    the other through (the hosts were compared as written)."""
    unicode, ascii_form = Guard(("bücher.example",)), Guard(("xn--bcher-kva.example/gaia",))
    for url in ("http://xn--bcher-kva.example/x", "https://WWW.BÜCHER.example/", "http://a.xn--bcher-kva.example"):
        assert unicode.blocks(url) == "bücher.example", url
    for url in ("https://bücher.example/gaia/1", "https://bücher\u3002example/gaia", "http://xn--bcher-kva.example/gaia"):
        assert ascii_form.blocks(url) == "xn--bcher-kva.example/gaia", url
    assert unicode.blocks("http://buecher.example/") is None
    assert ascii_form.blocks("https://bücher.example/other") is None
    assert Guard(("*.bücher.example/*",)).blocks("https://a.xn--bcher-kva.example/q") is not None


def test_a_providers_answer_and_its_results_are_bounded(tmp_path, monkeypatch):
    """A result's title and snippet are cut (the model reads at most 20 of them); an answer larger than
    MAX_ANSWER_BYTES is read no further: an outage, retried, then infra (before: read whole, unbounded)."""
    from harness.environments.websearch import env
    from harness.environments.websearch.providers import MAX_SNIPPET, MAX_TITLE

    long = [{"title": "T" * 5000, "url": "http://shop.gaia.test/a", "snippet": "word " * 20_000, "date": None}]
    with FakeSearch("searxng", results=long) as server:
        search, _ = _search("searxng", server, tmp_path, monkeypatch)
        text = search.search("teak")
        assert "T" * MAX_TITLE in text and "T" * (MAX_TITLE + 1) not in text
        assert len(text) < MAX_TITLE + MAX_SNIPPET + 200, len(text)
        monkeypatch.setattr(env, "MAX_ANSWER_BYTES", 50_000)  # the answer above is ~100 KB
        search, _ = _search("searxng", server, tmp_path, monkeypatch, max_retries=1)
        with pytest.raises(SearchUnavailable, match="larger than 50000 bytes"):
            search.search("teak")


@pytest.mark.parametrize(("flag", "toml", "named"), [
    ("", None, "--search-block ''"), ("https://", None, "--search-block 'https://'"),
    (None, ["example.org", " "], "[search] block ' '"), (None, ["www./answers"], "[search] block 'www./answers'")])
def test_a_block_pattern_with_nothing_to_match_is_refused_naming_it(flag, toml, named, tmp_path):
    """Before, such a pattern blocked nothing, silently, yet changed run.json's fingerprint."""
    config = tmp_path / "s.toml"
    config.write_text(f"[search]\nblock = {json.dumps(toml)}\n" if toml else "")
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": "q", "question": "Where?", "answer": "here"}) + "\n")
    proc = harness("run", "--dataset", data, "--model", "replay", "--config", config, "--output-dir", tmp_path / "out",
                   *(["--search-block", flag] if flag is not None else []))
    assert proc.returncode == 2, explain(proc)
    assert named in proc.stderr and "nothing to match" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_outage_backoff_doubles_up_to_the_retry_after_cap(tmp_path, monkeypatch):
    """Before, it doubled without end: max_retries = 12 waited 2048 s before its last try."""
    from harness.environments.websearch import env

    waits: list[float] = []
    with FakeSearch("tavily", script=[("status", 503)] * 8) as server:
        search, _ = _search("tavily", server, tmp_path, monkeypatch, max_retries=8)
        search.settings = search.settings.model_copy(update={"backoff": 1.0})
        monkeypatch.setattr(env.time, "sleep", waits.append)
        assert "Teak Bench" in search.search("teak bench")
    assert waits == [1, 2, 4, 8, 16, 32, env.MAX_RETRY_AFTER_S, env.MAX_RETRY_AFTER_S], waits


def test_two_threads_caching_the_same_search_at_once_both_succeed(tmp_path):
    """AutoGen runs a turn's tool calls in threads of one process: two identical searches wrote the same
    temporary file (named by the process alone), and one's os.replace found it gone (FileNotFoundError
    out of web_search)."""
    import threading

    from harness.environments.websearch.cache import SearchCache
    from harness.environments.websearch.providers import Hit

    cache, hits, errors = SearchCache(tmp_path / "cache"), [Hit("t", "http://x.test/", "s" * 1000)] * 20, []

    def put_many():
        for _ in range(300):
            try:
                cache.put("same-key", hits)
            except OSError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=put_many) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and cache.get("same-key") == hits
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["same-key.json"]  # no temporary file left
