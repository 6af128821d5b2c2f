"""Issue 29 item 3: the leakage guard checks every hop of a redirect chain and reads paths as a server does.

Before, fetch_url and download_file let urllib follow a redirect chain inside the sandbox and checked only
its first and last URL: unblocked → blocked → unblocked (a Hub `resolve/` link to a CDN) read the blocked
hop's answer. Dot segments (`/./secret`, `/x/../secret`) and `%2D` in a query passed the guard, and the
default list missed the hub's `/api/` paths. The site is a server on the sandbox's own loopback."""

from __future__ import annotations

import asyncio

import pytest

from harness.environments.fetch import FetchEnv
from harness.environments.files import FileEnv
from harness.environments.web import WebEnv
from harness.environments.websearch.guard import DEFAULT_BLOCK, Guard
from harness.sandbox.contract import SandboxSpec
from harness.traces import Tracer, read_trace
from tests.test_media_tools import start_loopback_site

SITE = "http://127.0.0.1:47123"
SHAPES = [f"{SITE}/chain", f"{SITE}/./secret/x", f"{SITE}/x/../secret/x", f"{SITE}/%73ecret/x"]


@pytest.mark.parametrize("url", [
    "https://hf.co/datasets/gaia-benchmark/GAIA",
    "https://hf-mirror.com/datasets/gaia-benchmark/GAIA/resolve/main/2023/validation/metadata.jsonl",
    "https://huggingface.co/api/datasets/gaia%2Dbenchmark/GAIA/parquet",
    "https://hf.co/api/datasets/gaia-benchmark/GAIA",
    "https://huggingface.co/api/datasets/someone/GAIA-copy",
    "https://datasets-server.huggingface.co/rows?dataset=gaia%2Dbenchmark%2FGAIA&config=2023_all",
    "https://huggingface.co/x/../datasets/gaia-benchmark/GAIA",
    "https://huggingface.co/./datasets/gaia-benchmark/GAIA",
    "https://huggingface.co/datasets/x/%2E%2E/gaia-benchmark/GAIA",
])
def test_the_default_list_blocks_every_published_shape(url):
    assert Guard(DEFAULT_BLOCK).blocks(url) is not None, url


@pytest.mark.parametrize("url", [
    "https://huggingface.co/datasets/gaia-benchmark-other/x", "https://huggingface.co/datasets/openai/gsm8k",
    "https://hf.co/api/models/Qwen/Qwen2.5-0.5B", "https://example.com/x/../gaia-benchmark",
])
def test_the_default_list_leaves_other_pages(url):
    assert Guard(DEFAULT_BLOCK).blocks(url) is None, url


@pytest.fixture
def site_sandbox(provider, image, run_id):
    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="guard-hops")) as sb:
        start_loopback_site(sb)
        yield sb


def _never_reached_the_secret(sb) -> list[str]:
    hits = sb.shell("cat /tmp/hits").stdout.split()
    assert not any("secret" in hit for hit in hits), hits
    return hits


@pytest.mark.docker
def test_fetch_url_checks_every_hop_and_reads_dot_segments(site_sandbox, tmp_path):
    sb, trace_path = site_sandbox, tmp_path / "t.jsonl"
    fetch = FetchEnv(FileEnv(sb, Tracer(trace_path)), guard=Guard(("127.0.0.1/secret",)))
    replies = [fetch.fetch(url) for url in SHAPES]
    for url, reply in zip(SHAPES, replies, strict=True):
        assert reply.startswith("Error: ") and "blocked by the leakage guard" in reply, (url, reply)
        assert "the answer is 42" not in reply
    assert _never_reached_the_secret(sb) == ["/chain"]  # the chain's first hop only; the rest never asked
    assert sb.shell("ls /workspace/fetched 2>/dev/null | wc -l").stdout.strip() == "0"
    assert sum(e.env == "guard" for e in read_trace(trace_path)) == len(SHAPES)
    ok = fetch.fetch(f"{SITE}/hop")  # an unblocked chain is still followed
    assert ok.startswith(f"Fetched {SITE}/hop (redirected to {SITE}/ok)") and "the answer is 42" in ok, ok


@pytest.mark.docker
def test_download_file_checks_every_hop_and_reads_dot_segments(site_sandbox, tmp_path):
    sb, trace_path = site_sandbox, tmp_path / "t.jsonl"
    web = WebEnv(sb, Tracer(trace_path))
    web.guard = Guard(("127.0.0.1/secret",))

    async def downloads() -> list[str]:
        try:
            return [await web.download(url) for url in [*SHAPES, f"{SITE}/hop"]]
        finally:
            await web.close()

    *refused, ok = asyncio.run(downloads())
    for url, reply in zip(SHAPES, refused, strict=True):
        assert reply.startswith("Error: ") and "blocked by the leakage guard" in reply, (url, reply)
    assert ok.startswith(f"Downloaded {SITE}/hop to /workspace/downloads/"), ok
    assert _never_reached_the_secret(sb) == ["/chain", "/hop", "/ok"]
    assert sum(e.env == "guard" for e in read_trace(trace_path)) == len(SHAPES)


@pytest.mark.docker
def test_visit_url_refuses_a_page_reached_through_a_blocked_hop(site_sandbox, tmp_path):
    """Chromium follows the chain itself; the page it lands on (unblocked) is refused when a hop was blocked,
    and its text never reaches the model."""
    sb, trace_path = site_sandbox, tmp_path / "t.jsonl"
    web = WebEnv(sb, Tracer(trace_path))
    web.guard = Guard(("127.0.0.1/secret",))

    async def visits() -> list[str]:
        try:
            return [await web.visit(url) for url in [f"{SITE}/chain", f"{SITE}/hop"]]
        finally:
            await web.close()

    chained, ok = asyncio.run(visits())
    assert chained == f"Error: {SITE}/secret/hop is blocked by the leakage guard (pattern '127.0.0.1/secret'): " \
        "it publishes the benchmark's questions and answers. Find the facts elsewhere.", chained
    assert "the answer is 42" in ok and f"URL: {SITE}/ok" in ok, ok
    assert [e.args["url"] for e in read_trace(trace_path) if e.env == "guard"] == [f"{SITE}/secret/hop"]
