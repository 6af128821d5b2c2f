"""Issue 29 item 2: fetch_url and download_file (and the site search's crawl) go through the run's web proxy.

Before, their requests went around the proxy: a --web-record run recorded none of them, and a --web-replay run
could not resolve the host an agent fetched ("cannot resolve the host of http://…"). Here a site of the test's
own, served over HTTP and HTTPS (its own certificate) with content made for this test, is fetched and
downloaded by an agent in a real --web-record run; the site is stopped with the run, and a --web-replay run
of the same turns gets the same tool results, every request a hit."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import pytest

from tests.helpers.e2e import (
    containers_of,
    explain,
    harness,
    out_dir,
    remove_leftovers,
    replay_dataset,
    rows,
    trace,
    web_responses,
)
from tests.test_web_archive import self_signed

ALIAS = "files.fetch.test"
SERVE = '''
import ssl, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGES = {
    "/": ("text/html; charset=utf-8", "<html><head><title>Files</title></head><a href='/notes.html'>notes</a></html>"),
    "/notes.html": ("text/html; charset=utf-8", "<html><head><title>Notes</title></head><p>NOTE_TOKEN</p></html>"),
    "/data/report.txt": ("text/plain", "REPORT_TOKEN\\n"),
    "/data/table.csv": ("text/csv", "name,value\\nsecret,TABLE_TOKEN\\n"),
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/notes.html")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        kind, text = PAGES.get(self.path, ("text/plain", "no such page"))
        body = text.encode()
        self.send_response(200 if self.path in PAGES else 404)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


plain = ThreadingHTTPServer(("0.0.0.0", 80), Handler)
tls = ThreadingHTTPServer(("0.0.0.0", 443), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("/site/cert.pem", "/site/key.pem")
tls.socket = context.wrap_socket(tls.socket, server_side=True)
threading.Thread(target=tls.serve_forever, daemon=True).start()
print("ready", flush=True)
plain.serve_forever()
'''


def site(folder: Path, tokens: dict[str, str]) -> Path:
    """The test's site: `serve.py` above with this run's tokens, and a self-signed certificate for ALIAS."""
    folder.mkdir(parents=True)
    (folder / "site.toml").write_text(f'alias = "{ALIAS}"\n')
    serve = SERVE
    for name, token in tokens.items():
        serve = serve.replace(name, token)
    (folder / "serve.py").write_text(serve)
    self_signed(folder, ALIAS)
    return folder


def call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


URLS = [f"http://{ALIAS}/moved", f"http://{ALIAS}/notes.html", f"https://{ALIAS}/data/table.csv",
        f"http://{ALIAS}/data/report.txt", f"https://{ALIAS}/notes.html"]
TURNS = [call("fetch_url", url=URLS[0]),  # a redirect, hop by hop: /moved, then /notes.html
         call("fetch_url", url=URLS[2]),
         call("download_file", target=URLS[3]),
         call("download_file", target=URLS[4]),
         call("run_shell", command="cat /workspace/downloads/report.txt /workspace/downloads/notes.html"),
         {"content": "<solution>42</solution>"}]


def tool_results(out: Path) -> list[tuple[str, str]]:
    (row,) = rows(out)
    return [(e["name"], e["content"]) for e in trace(out, row) if e["type"] == "tool_result"]


@pytest.mark.docker
def test_fetch_and_download_are_recorded_and_replayed_with_the_site_gone(tmp_path, proxy_image, reliability):
    tokens = {name: f"{name.lower()}-{secrets.token_hex(8)}" for name in ("NOTE_TOKEN", "REPORT_TOKEN", "TABLE_TOKEN")}
    folder = site(tmp_path / "site", tokens)
    data, config = replay_dataset(tmp_path / "data", [("fetcher", "What is 6*7?", "42")], lambda iid: TURNS)
    recording, replaying = out_dir(tmp_path), out_dir(tmp_path, "p")
    t0 = time.monotonic()
    try:
        rec = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--website", folder,
                      "--web-record", "--output-dir", recording,
                      env={"HARNESS_WEB_UPSTREAM_CA": str(folder / "cert.pem")})  # the site's own certificate
        assert rec.returncode == 0, explain(rec)
        live = tool_results(recording)
        in_warc = web_responses(recording)
        # The site is gone with the recording run; the replay has no --website and no route out.
        rep = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--web-replay", recording,
                      "--output-dir", replaying)
        assert rep.returncode == 0, explain(rep)
        again = tool_results(replaying)
        archive = rows(replaying)[0]["env_outcomes"].get("web_archive", {})
        same = sum(a == b for a, b in zip(live, again, strict=False))
        reliability.record("fetch_url and download_file under --web-record, then --web-replay with the site gone",
                           f"{sum(u in in_warc for u in URLS)} of {len(URLS)} URLs in the WARC; {same} of "
                           f"{len(live)} tool results replayed the same ({archive.get('hit', 0)} hits, "
                           f"{archive.get('miss', 0)} misses)", started=t0)
        text = "\n".join(content for _, content in live)
        assert all(token in text for token in tokens.values()), live  # the site's content, fetched live
        assert {url: in_warc.get(url) for url in URLS} == {url: "fetcher/1" for url in URLS}, in_warc
        assert again == live
        assert archive == {"hit": 4}, archive  # one per fetch and download (a redirect's hop is not counted)
        assert containers_of(recording) == [] and containers_of(replaying) == []
    finally:
        remove_leftovers(recording)
        remove_leftovers(replaying)
