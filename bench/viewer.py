"""Benchmark `harness view` on a large run: how long until the table shows every row.

  .venv/bin/python bench/viewer.py [--instances N] [--rounds R]     # defaults: 5000, 3

Writes a synthetic run directory of N instances (rows and one trace each, the test suite's
generator), then each round starts a fresh viewer (no warm cache) and opens a fresh page in
Debian's Chromium (Playwright, /usr/bin/chromium, headless), timing from `page.goto` until
the table holds all N rows (`#row-count` says N shown). Prints the median against the 3 s
target, plus, for reference, writing and opening the static report of the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.report.html import write_html_report  # noqa: E402
from harness.report.view import ViewServer  # noqa: E402
from tests.test_html_report import make_run_dir  # noqa: E402

TARGET_S = 3.0
CHROMIUM = "/usr/bin/chromium"


def until_all_rows(page, url: str, n: int) -> float:
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_function(f"() => document.querySelector('#row-count')?.dataset.shown === '{n}'", timeout=60_000)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = make_run_dir(Path(tmp) / "big-run", args.instances)
        print(f"wrote a {args.instances}-instance run in {time.perf_counter() - t0:.1f}s")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            times = []
            for _ in range(args.rounds):
                with ViewServer([run]) as server:
                    ctx = browser.new_context()
                    times.append(until_all_rows(ctx.new_page(), server.url, args.instances))
                    ctx.close()
            med = statistics.median(times)
            print(f"viewer: table shows all {args.instances} rows after {med:.2f}s (median of {args.rounds}: "
                  + ", ".join(f"{t:.2f}" for t in times)
                  + f"); ratio to the {TARGET_S:.0f}s target {med / TARGET_S:.2f}")

            t0 = time.perf_counter()
            out = write_html_report([run], Path(tmp) / "report.html")
            wrote = time.perf_counter() - t0
            ctx = browser.new_context()
            opened = until_all_rows(ctx.new_page(), out.as_uri(), args.instances)
            ctx.close()
            print(f"static report (traces embedded): written in {wrote:.2f}s, {out.stat().st_size / 1e6:.1f} MB, "
                  f"all rows shown after {opened:.2f}s")
            browser.close()
    sys.exit(0 if med <= TARGET_S else 1)


if __name__ == "__main__":
    main()
