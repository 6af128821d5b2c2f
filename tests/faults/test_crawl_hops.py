"""Issue 29 item 3 (the site crawl): the leakage guard checks every hop of a redirect chain the crawl follows.

Before, the crawler of `--search site` let urllib follow redirects and indexed each page under the chain's last
URL, with no guard at all: unblocked → blocked → unblocked put the page behind the blocked hop into the index,
and the search-time guard (which sees only the hit's URL, the unblocked last one) gave it back as a snippet.
The site is a real `--website` container; the crawl runs in a real sandbox on its network."""

from __future__ import annotations

import json

import pytest

from harness.environments.websearch.env import WebSearch
from harness.environments.websearch.settings import SearchSettings
from harness.environments.websearch.site import index_site
from harness.sandbox.contract import SandboxSpec
from harness.traces import Tracer

ALIAS = "crawl.guard.test"
BLOCK = (f"{ALIAS}/secret",)
SERVE = r'''
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
HITS = []
PAGES = {
    "/": "<title>Home</title><a href='/chain'>resources</a> <a href='/about'>about</a> <a href='/secret/direct'>x</a>",
    "/about": "<title>About</title>We sell teak benches in Ravensworth.",
    "/secret/direct": "<title>Direct</title>zebra published answers: the answer is 41",
    "/cdn/file": "<title>File</title>zebra published answers: the answer is 42",
}
MOVED = {"/chain": "/secret/hop", "/secret/hop": "http://crawl.guard.test/cdn/file"}
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/hits":
            HITS.append(self.path)
        moved, body = MOVED.get(self.path), json.dumps(HITS) if self.path == "/hits" else PAGES.get(self.path, "")
        self.send_response(302 if moved else 200 if body else 404)
        sent = {"Location": moved} if moved else {"Content-Type": "text/html"}
        for name, value in {**sent, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body.encode())
    log_message = lambda self, *args: None  # noqa: E731
with ThreadingHTTPServer(("0.0.0.0", 80), Handler) as server:
    print("ready", flush=True)
    server.serve_forever()
'''


@pytest.mark.docker
def test_the_site_crawl_indexes_no_page_behind_a_blocked_hop(provider, image, run_id, tmp_path, reliability):
    site = tmp_path / "site"
    site.mkdir()
    (site / "serve.py").write_text(SERVE)
    (site / "site.toml").write_text(f'alias = "{ALIAS}"\n')
    with provider.website(site, image, run_id) as policy:
        pages, passages, withheld = index_site(
            provider, SandboxSpec(image=image, run_id=run_id, instance_id="crawl", network=policy), ALIAS,
            tmp_path / "index", BLOCK)
        with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="hits", network=policy)) as sb:
            got = sb.exec(["python3", "-c", f"import urllib.request; print(urllib.request.urlopen("
                                            f"'http://{ALIAS}/hits', timeout=10).read().decode())"], timeout=30)
    search = WebSearch(SearchSettings(provider="site", site_index=str(tmp_path / "index"), block=BLOCK),
                       Tracer(tmp_path / "t.jsonl"))
    found = search.search("zebra published answers", 5)
    assert "the answer is 4" not in found and "No results" in found, found
    assert "teak benches" in search.search("teak benches", 5)  # the rest of the site is indexed
    assert (pages, withheld) == (2, 2), (pages, passages, withheld)  # / and /about; both /secret/ URLs withheld
    requested = json.loads(got.stdout)
    assert not any(p.startswith(("/secret", "/cdn")) for p in requested), requested  # never requested
    assert "/chain" in requested and "/about" in requested, requested
    reliability.record("site crawl: unblocked -> blocked -> unblocked redirect chain", "blocked hop never requested, "
                       "nothing behind it indexed")
