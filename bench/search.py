"""Costs of the agent's search and sight tools, each section against a baseline measured in the same run.

    .venv/bin/python bench/search.py [--rounds N]      # default 200; needs the Docker engine (the site)

Sections (each prints its figures and a ratio; add one as a function in SECTIONS):

1. `site`: the `site` provider's search latency (p50, p90) over the real offline site
   (datasets/gaia-smoke/website, crawled from a sandbox and indexed as a run does), against a bare bm25s
   `retrieve` of the same tokens on the same index: what the tool adds (tokenizing, dedup by page,
   the guard, the trace event, the text).
2. `provider`: one `web_search` call to a hosted provider (tavily, its fake server in this process,
   cache off), against the bare HTTP request with the same body to the same server through httpx:
   what the provider layer adds over the wire exchange.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUERIES = ["teak bench warranty", "soaker hose price", "supplier deliveries 2023", "who founded the shop",
           "heirloom tomato seeds", "catalog page 2", "Aqua Flow GmbH", "hammock stand stock"]


def timed(fn: Callable[[], object], rounds: int) -> list[float]:
    for _ in range(5):  # warm-up, not counted
        fn()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def line(name: str, values: list[float]) -> None:
    print(f"  {name:<34} p50 {p(values, 50) * 1000:8.3f} ms   p90 {p(values, 90) * 1000:8.3f} ms")


def site_section(rounds: int) -> None:
    import bm25s

    from harness.environments.websearch.env import WebSearch
    from harness.environments.websearch.settings import SearchSettings
    from harness.environments.websearch.site import SiteIndex, index_site
    from harness.sandbox.contract import SandboxSpec
    from harness.sandbox.registry import get_provider
    from harness.traces import Tracer

    provider = get_provider("docker")
    image = provider.preflight(network="none", log=lambda m: None)
    run_id = f"bench-search-{int(time.time())}"
    folder = Path(tempfile.mkdtemp()) / "index"
    with provider.website(REPO / "datasets" / "gaia-smoke" / "website", image, run_id) as network:
        pages, passages, _ = index_site(provider, SandboxSpec(image=image, run_id=run_id, instance_id="crawl",
                                                              network=network), "shop.gaia.test", folder, ())
    search = WebSearch(SearchSettings(provider="site", site_index=str(folder), cache=False), Tracer(None))
    bare = SiteIndex(folder).retriever
    queries = iter(QUERIES * (rounds + 10))
    tool = timed(lambda: search.search(next(queries), 5), rounds)
    tokens = {q: bm25s.tokenize([q], stopwords="en", show_progress=False) for q in QUERIES}
    queries = iter(QUERIES * (rounds + 10))
    raw = timed(lambda: bare.retrieve(tokens[next(queries)], k=20, show_progress=False), rounds)
    print(f"site: {pages} pages, {passages} passages, {rounds} searches each")
    line("web_search (site)", tool)
    line("bare bm25s retrieve", raw)
    print(f"  ratio p50 {p(tool, 50) / p(raw, 50):.2f}x   p90 {p(tool, 90) / p(raw, 90):.2f}x")


def provider_section(rounds: int) -> None:
    import os

    import httpx

    from harness.environments.websearch.env import WebSearch
    from harness.environments.websearch.settings import SearchSettings
    from harness.traces import Tracer
    from tests.fakes.search_servers import FakeSearch

    os.environ["BENCH_TAVILY_KEY"] = "bench-key"
    with FakeSearch("tavily", key="bench-key") as server:
        search = WebSearch(SearchSettings(provider="tavily", base_url=server.base_url, api_key_env="BENCH_TAVILY_KEY",
                                          cache=False), Tracer(None))
        client = httpx.Client()
        body = {"query": "teak bench", "max_results": 5}
        tool = timed(lambda: search.search("teak bench", 5), rounds)
        raw = timed(lambda: client.post(f"{server.base_url}/search", json=body,
                                        headers={"Authorization": "Bearer bench-key"}).json(), rounds)
    print(f"provider: tavily's fake server, {rounds} calls each")
    line("web_search (tavily)", tool)
    line("bare httpx POST", raw)
    print(f"  ratio p50 {p(tool, 50) / p(raw, 50):.2f}x   p90 {p(tool, 90) / p(raw, 90):.2f}x")


SECTIONS: dict[str, Callable[[int], None]] = {"site": site_section, "provider": provider_section}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--only", choices=sorted(SECTIONS), action="append")
    args = parser.parse_args()
    for name in args.only or SECTIONS:
        SECTIONS[name](args.rounds)


if __name__ == "__main__":
    main()
