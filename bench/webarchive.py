"""The cost of recording the web, and the speed of replaying it (issue 22): one run, three sides.

    .venv/bin/python bench/webarchive.py [--rounds N] [--fetches M]   # defaults: 8, 120

Needs a running Docker engine. The smoke site is served on its internal network as a --website run
serves it; three real sandboxes browse it with real Chromium (WebEnv.visit, what an agent's
visit_url costs: navigation, load, page.js to text):
  live:    a sandbox started before any proxy: straight to the site;
  record:  a sandbox behind the run's recording mitmproxy (harness/sandbox/docker/webproxy.py,
           every exchange written to the WARC);
  replay:  a sandbox on the replay proxy's own internal network, served from the archive the record
           side just wrote (the site is still up but unreachable from there).
1. Page-load latency: the same PAGES visited by live and record, interleaved page by page (order
   alternated), N rounds after one warm-up round; then live and replay the same way.
2. Throughput: M plain HTTP GETs of the same pages, 8 at a time, from inside each sandbox (stdlib
   urllib, direct or through the proxy): pages per second of each side.
Printed: medians and p90 per side, and the ratios record/live (goal: page load at most 1.15) and
replay/live (goal: below 1). Every visit's text is checked, so a fast wrong answer fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SITE = ROOT / "datasets" / "gaia-smoke" / "website"
PAGES = {"/": "Northwind Garden Supply", "/about": "Founded in 1987", "/catalog?page=1": "Catalog (page 1 of",
         "/catalog?page=2": "Catalog (page 2 of", "/catalog?page=3": "Catalog (page 3 of", "/reports": "Reports"}
FETCH = r"""
import concurrent.futures as cf, json, sys, time, urllib.request
proxy, urls, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy} if proxy else {}))
def get(i):
    with opener.open(urls[i % len(urls)], timeout=30) as r:
        return len(r.read())
started = time.perf_counter()
with cf.ThreadPoolExecutor(8) as pool:
    sizes = list(pool.map(get, range(n)))
print(json.dumps({"seconds": time.perf_counter() - started, "bytes": sum(sizes)}))
"""


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]


async def visit(web, url: str, want: str) -> float:
    started = time.perf_counter()
    text = await web.visit(url)
    elapsed = time.perf_counter() - started
    if text.startswith("Error") or want not in text:
        raise RuntimeError(f"{url}: expected {want!r}, got {text[:300]!r}")
    return elapsed


async def latencies(a, b, base: str, rounds: int) -> tuple[list[float], list[float]]:
    """Each page on both sides, interleaved (the side going first alternates); round 0 is a warm-up."""
    out_a, out_b, turn = [], [], 0
    for number in range(rounds + 1):
        for path, want in PAGES.items():
            first, second = (a, b) if turn % 2 == 0 else (b, a)
            t1, t2 = await visit(first, base + path, want), await visit(second, base + path, want)
            turn += 1
            if number:
                out_a.append(t1 if first is a else t2)
                out_b.append(t2 if first is a else t1)
    return out_a, out_b


def throughput(sb, base: str, proxy: str, fetches: int) -> float:
    urls = json.dumps([base + path for path in PAGES])
    done = sb.exec(["python3", "-c", FETCH, proxy, urls, str(fetches)], timeout=300)
    if done.exit_code != 0:
        raise RuntimeError(f"fetching in the sandbox failed: {done.stderr[-800:]}")
    return fetches / json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def line(label: str, ours: list[float], base: list[float]) -> tuple[str, float]:
    """A latency row (ms, medians and p90) and its ratio."""
    a, b = statistics.median(ours) * 1000, statistics.median(base) * 1000
    return (f"{label:<34}{a:>9.1f}{b:>9.1f}{a / b:>8.2f}   [p90 {p90(ours) * 1000:.1f} / {p90(base) * 1000:.1f}]",
            a / b)


def rate(label: str, ours: float, base: float) -> tuple[str, float]:
    return f"{label:<34}{ours:>9.1f}{base:>9.1f}{ours / base:>8.2f}", ours / base


async def compare(name: str, side, live, base: str, args) -> list[tuple[str, float]]:
    """One proxied side against live: (sandbox, WebEnv, proxy address or "") each."""
    (side_sb, side_web, address), (live_sb, live_web, _) = side, live
    ours, theirs = await latencies(side_web, live_web, base, args.rounds)
    return [line(f"page load, {name}/live (n={len(ours)})", ours, theirs),
            rate(f"throughput, {name}/live (pages/s)", throughput(side_sb, base, address, args.fetches),
                 throughput(live_sb, base, "", args.fetches))]


async def bench(args, provider, image: str, run_id: str, site: str, archive: Path) -> list[tuple[str, float]]:
    from harness.environments.web import WebEnv
    from harness.sandbox.contract import SandboxSpec
    from harness.sandbox.site import site_info
    from harness.traces import Tracer

    base = f"http://{site_info(SITE)[0]}"
    spec = lambda name, network: SandboxSpec(image=image, run_id=run_id, instance_id=name, network=network)  # noqa: E731
    quiet = {"log_": lambda m: None}
    out: list[tuple[str, float]] = []
    with provider.open(spec("live", site)) as live_sb:  # before any proxy: no proxy flags
        live = (live_sb, WebEnv(live_sb, Tracer(None)), "")
        try:
            for name in ("record", "replay"):  # replay serves the archive the record side wrote
                recording = name == "record"
                options = {"out": archive} if recording else {"archives": (archive,)}
                with provider.web_proxy(name, run_id, site if recording else None, **options, **quiet) as proxy, \
                        provider.open(spec(name, site if recording else f"internal:{proxy.network}")) as sb:
                    side = (sb, WebEnv(sb, Tracer(None)), f"http://{proxy.address}:8080")
                    try:
                        out += await compare(name, side, live, base, args)
                    finally:
                        await side[1].close()
        finally:
            await live[1].close()
    return out


def verdict(rows: list[tuple[str, float]]) -> list[str]:
    record, replay = rows[0][1], rows[2][1]
    return [f"record adds {100 * (record - 1):+.0f}% to page load (goal <= +15%): "
            f"{'PASS' if record <= 1.15 else 'MISS'}",
            f"replay page load {replay:.2f} of live (goal < 1): {'PASS' if replay < 1 else 'MISS'}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds of every page per side (after one warm-up)")
    parser.add_argument("--fetches", type=int, default=120, help="HTTP GETs per side for the throughput")
    args = parser.parse_args()
    if args.rounds < 1 or args.fetches < 1:
        parser.error("--rounds and --fetches must be >= 1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds like Ctrl-C: the contexts remove containers

    from harness.sandbox.registry import get_provider

    provider = get_provider("docker")
    image = provider.preflight()
    run_id = f"bench-{secrets.token_hex(3)}"
    print(f"image {image}  run {run_id}  rounds {args.rounds} x {len(PAGES)} pages (+1 warm-up)  "
          f"fetches {args.fetches}")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp, provider.website(SITE, image, run_id) as site:
            rows = asyncio.run(bench(args, provider, image, run_id, site, Path(tmp) / "web.warc.gz"))
        print(f"{'':<34}{'side':>9}{'live':>9}{'ratio':>8}   (ms, medians; pages/s)")
        print("\n".join([row for row, _ in rows] + verdict(rows)))
    finally:
        if left := provider.cleanup(run_id=run_id):  # the contexts remove everything; this is a backstop
            print(f"removed {len(left)} leftover container(s) of {run_id}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
