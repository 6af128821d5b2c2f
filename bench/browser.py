"""Benchmark the harness browser (Chromium in the sandbox, CDP over the forwarded port) against
Playwright driving Chromium directly on the host, in one process.

  .venv/bin/python bench/browser.py [--rounds N] [--visits M]     # defaults: 5, 30

1. Cold start (median of N, order alternated each round), each round from nothing to the first
   page shown as text:
   harness: an already-open sandbox (its start is not timed) -> WebEnv.visit(home)
            (Playwright start, POST /browser/start, connect_over_cdp, goto, page.js)
   direct:  Playwright start -> chromium.launch(/usr/bin/chromium, sandboxd's flags) -> new_page
            -> goto(home) -> evaluate(page.js), the site served on 127.0.0.1 by serve.py's Handler
2. Page visit, warm browser (median of M, interleaved): web.visit(/catalog?page=2) vs
   page.goto(...) + page.evaluate(page.js); both texts are checked to be the same.
3. Page as markdown (median of M, interleaved): web._snapshot() vs page.evaluate(page.js).
Plus one reference line: a bare CDP round trip (page.evaluate("1")) on each side.
Needs Debian's chromium on the host (apt-get install -y chromium). See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import secrets
import signal
import statistics
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "datasets" / "gaia-smoke" / "website"
SANDBOXD = ROOT / "images" / "sandbox" / "sandboxd.py"
CHROMIUM = "/usr/bin/chromium"
WARMUP = 3  # warm-up iterations of each latency measure, not counted


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def direct_flags() -> list[str]:
    """sandboxd's CHROMIUM_FLAGS minus what Playwright must own: remote debugging (it drives the
    browser over a pipe), the profile dir (it makes its own) and the start URL."""
    token = os.environ.get("HARNESS_SANDBOX_TOKEN")  # sandboxd pops it at import; keep ours
    flags = load("_bench_sandboxd", SANDBOXD).CHROMIUM_FLAGS
    if token is not None:
        os.environ["HARNESS_SANDBOX_TOKEN"] = token
    return [f for f in flags if not f.startswith(("--remote-debugging", "--user-data-dir")) and f.startswith("--")]


def p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10, method="inclusive")[-1] if len(xs) > 1 else xs[0]


def check(text: str, want: str, what: str) -> None:
    if text.startswith("Error") or want not in text:
        raise RuntimeError(f"{what}: expected {want!r} in the page text, got {text[:300]!r}")


async def interleave(ours, theirs, count: int, warmup: int) -> tuple[list[float], list[float]]:
    a, b = [], []
    for i in range(warmup + count):
        first, second = (ours, theirs) if i % 2 == 0 else (theirs, ours)
        t1, t2 = await first(), await second()
        t_ours, t_theirs = (t1, t2) if i % 2 == 0 else (t2, t1)
        if i >= warmup:
            a.append(t_ours)
            b.append(t_theirs)
    return a, b


async def bench(args, image: str, run_id: str, site, local: str, page_js: str, flags: list[str]) -> list:
    from playwright.async_api import async_playwright

    from harness.environments.web import WebEnv
    from harness.sandbox.contract import SandboxSpec
    from harness.sandbox.registry import get_provider
    from harness.sandbox.site import site_info
    from harness.traces import Tracer

    provider = get_provider("docker")
    remote = f"http://{site_info(SITE)[0]}"
    home, catalog, title = "/", "/catalog?page=2", "Northwind Garden Supply"
    spec = lambda i: SandboxSpec(image=image, run_id=run_id, instance_id=f"browser-{i}",  # noqa: E731
                                 network=site)
    rows, browser_start = [], []

    # 1. cold start ------------------------------------------------------------------
    async def harness_cold(i: int) -> float:
        sb = provider.start(spec(i))  # not timed
        web = WebEnv(sb, Tracer(None))
        try:
            service_start = sb.start_browser  # time the in-container Chromium start too

            def timed_start(*args):
                t = time.perf_counter()
                try:
                    return service_start(*args)
                finally:
                    browser_start.append(time.perf_counter() - t)
            sb.start_browser = timed_start
            started = time.perf_counter()
            text = await web.visit(remote + home)
            elapsed = time.perf_counter() - started
            check(text, title, "harness cold visit")
            return elapsed
        finally:
            await web.close()
            provider.teardown(sb)

    async def direct_cold(_: int) -> float:
        started = time.perf_counter()
        pw = await async_playwright().start()
        try:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=flags)
            page = await browser.new_page()
            await page.goto(local + home, wait_until="domcontentloaded")
            data = await page.evaluate(page_js)
            elapsed = time.perf_counter() - started
            await browser.close()
        finally:
            await pw.stop()
        check(data["text"], title, "direct cold visit")
        return elapsed

    ours, theirs = [], []
    for i in range(args.rounds):
        if i % 2 == 0:
            ours.append(await harness_cold(i)); theirs.append(await direct_cold(i))  # noqa: E702
        else:
            theirs.append(await direct_cold(i)); ours.append(await harness_cold(i))  # noqa: E702
    rows.append((f"1. cold start to first page (median of {args.rounds})", ours, theirs))
    rows.append(("   of which Chromium start in the sandbox", browser_start, None))

    # 2-4. warm browser ----------------------------------------------------------------
    sb = provider.start(spec("warm"))
    web = WebEnv(sb, Tracer(None))
    pw = await async_playwright().start()
    try:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=flags)
        page = await browser.new_page()
        check(await web.visit(remote + home), title, "harness warm-up")
        await page.goto(local + home, wait_until="domcontentloaded")
        texts: dict[str, str] = {}

        async def harness_visit() -> float:
            started = time.perf_counter()
            text = await web.visit(remote + catalog)
            elapsed = time.perf_counter() - started
            check(text, "Catalog (page 2 of", "harness visit")
            texts["harness"] = web._text
            return elapsed

        async def direct_visit() -> float:
            started = time.perf_counter()
            await page.goto(local + catalog, wait_until="domcontentloaded")
            data = await page.evaluate(page_js)
            elapsed = time.perf_counter() - started
            texts["direct"] = data["text"].replace(local, remote)
            return elapsed

        ours, theirs = await interleave(harness_visit, direct_visit, args.visits, WARMUP)
        if texts["harness"] != texts["direct"]:
            raise RuntimeError("the two sides serialized /catalog?page=2 differently")
        rows.append((f"2. page visit, warm browser (median of {args.visits})", ours, theirs))

        async def harness_snapshot() -> float:
            started = time.perf_counter()
            await web._snapshot()
            return time.perf_counter() - started

        async def direct_snapshot() -> float:
            started = time.perf_counter()
            await page.evaluate(page_js)
            return time.perf_counter() - started

        ours, theirs = await interleave(harness_snapshot, direct_snapshot, args.visits, WARMUP)
        rows.append((f"3. page as markdown, page.js (median of {args.visits})", ours, theirs))

        async def harness_rtt() -> float:
            started = time.perf_counter()
            await web._page.evaluate("1")
            return time.perf_counter() - started

        async def direct_rtt() -> float:
            started = time.perf_counter()
            await page.evaluate("1")
            return time.perf_counter() - started

        ours, theirs = await interleave(harness_rtt, direct_rtt, args.visits, WARMUP)
        rows.append((f"   ref: one CDP round trip, evaluate('1') (median of {args.visits})", ours, theirs))
        await browser.close()
    finally:
        await pw.stop()
        await web.close()
        provider.teardown(sb)
    return rows


def report(rows: list) -> None:
    print(f"{'':<58}{'harness':>10}{'direct':>10}{'ratio':>8}   (ms; p90 in brackets)")
    for label, ours, theirs in rows:
        h = statistics.median(ours) * 1000
        if theirs is None:
            print(f"{label:<58}{h:>10.1f}")
            continue
        d = statistics.median(theirs) * 1000
        print(f"{label:<58}{h:>10.1f}{d:>10.1f}{h / d:>8.2f}   "
              f"[{p90(ours) * 1000:.1f} / {p90(theirs) * 1000:.1f}]")
    print("Where the harness's extra time goes: every Playwright call is a CDP round trip over a WebSocket "
          "through the sandbox's published port and sandboxd's byte-for-byte forwarder (docker-proxy + "
          "an extra hop) instead of a local pipe; a cold start also pays POST /browser/start "
          "(Chromium launched in a container limited to the sandbox's CPUs) and connect_over_cdp.")
    print("Note on 1: sandboxd's Chromium opens about:blank at launch and WebEnv reuses that page, while the "
          "direct side pays new_page (a new context + renderer, ~300 ms), so cold start can come out even.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="cold starts per side")
    parser.add_argument("--visits", type=int, default=30, help="warm visits / snapshots per side (after warm-up)")
    args = parser.parse_args()
    if args.rounds < 1 or args.visits < 1:
        parser.error("--rounds and --visits must be >= 1")
    if not os.path.exists(CHROMIUM):
        print(f"{CHROMIUM} is missing: the direct side needs Debian's chromium on the host.\n"
              "  install it (as root): apt-get install -y chromium", file=sys.stderr)
        return 2
    # SIGTERM unwinds like Ctrl-C, so the finally blocks below still remove containers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from harness.environments.web import PAGE_JS
    from harness.sandbox.registry import get_provider

    provider = get_provider("docker")

    flags = direct_flags()
    handler = load("_bench_site", SITE / "serve.py").Handler
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    local = f"http://127.0.0.1:{server.server_address[1]}"

    image = provider.preflight()
    run_id = f"bench-{secrets.token_hex(3)}"
    print(f"image {image}  run {run_id}  cold rounds {args.rounds}  warm visits {args.visits} (+{WARMUP} warm-up)")
    print(f"host: {os.cpu_count()} CPUs, {CHROMIUM} with {' '.join(flags)}")
    try:
        with provider.website(SITE, image, run_id) as site:  # site: the sandboxes' network policy
            rows = asyncio.run(bench(args, image, run_id, site, local, PAGE_JS, flags))
        report(rows)
    finally:
        server.shutdown()
        server.server_close()
        left = len(provider.cleanup(run_id=run_id))
        if left:
            print(f"removed {left} leftover container(s) of {run_id}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("interrupted")
