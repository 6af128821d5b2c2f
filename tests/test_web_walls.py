"""Bot walls (issue 22 item 4): a real challenge page (403, Cloudflare's challenge markers) served by a site
of the test's own, loaded by real Chromium in a real sandbox through the run's recording proxy, is archived
as a wall, traced as env `web_wall` outcome `blocked`, counted in the row and the report, and the report
says how many instances met one."""

from __future__ import annotations

import json

import pytest

WALL_SITE = '''
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WALL = (b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
        b"<h1>Checking your browser</h1><div id='challenge'></div>"
        b"<script src='/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1'></script></body></html>")
PAGE = b"<!DOCTYPE html><html><head><title>Plain</title></head><body><p>Nothing to see.</p></body></html>"


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        status, body = (403, WALL) if self.path == "/wall" else (200, PAGE)
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("0.0.0.0", 80), Handler)
print("ready", flush=True)
server.serve_forever()
'''


@pytest.mark.docker
@pytest.mark.slow
def test_a_challenge_page_through_the_recording_proxy_is_an_instance_blocked_by_the_web(tmp_path):
    from warcio.archiveiterator import ArchiveIterator

    from tests.helpers.e2e import explain, harness, replay_dataset, rows

    site = tmp_path / "site"
    site.mkdir()
    (site / "site.toml").write_text('alias = "wall.gaia.test"\n')
    (site / "serve.py").write_text(WALL_SITE)
    visit = lambda url: {"tool_calls": [{"name": "visit_url", "arguments": {"url": url}}]}  # noqa: E731
    turns = {"walled": [visit("http://wall.gaia.test/wall"), {"content": "<solution>x</solution>"}],
             "open": [visit("http://wall.gaia.test/plain"), {"content": "<solution>x</solution>"}]}
    data, config = replay_dataset(tmp_path / "data", [("walled", "Q?", "x"), ("open", "Q?", "x")], turns.get)
    out = tmp_path / "run"
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--website", site,
                   "--web-record", "--search", "none", "--output-dir", out, "--workers", 2)
    assert proc.returncode == 0, explain(proc)
    by_id = {row["instance_id"]: row for row in rows(out)}
    assert by_id["walled"]["env_outcomes"]["web_wall"] == {"blocked": 1}, by_id["walled"]
    assert "web_wall" not in by_id["open"]["env_outcomes"], by_id["open"]
    assert "blocked by the web: 1 of 2 instance(s) met a CAPTCHA or bot wall (1 response(s)): walled" in proc.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["env_outcomes_per_instance"]["walled"]["web_wall"] == {"blocked": 1}

    (archive,) = [a for a in (out / "web").glob("*.warc.gz") if a.name != "search.warc.gz"]
    with archive.open("rb") as fh:
        walls = {r.rec_headers.get_header("WARC-Target-URI"): r.rec_headers.get_header("WARC-Harness-Blocked")
                 for r in ArchiveIterator(fh) if r.rec_type == "response"}
    assert walls["http://wall.gaia.test/wall"] == "/cdn-cgi/challenge-platform/"
    assert walls["http://wall.gaia.test/plain"] is None


def test_the_report_counts_walls_apart_from_the_guards_blocks():
    from harness.report.build import build_report
    from harness.report.output import end_lines
    from harness.results.model import ResultRow

    def row(iid: str, outcomes: dict) -> ResultRow:
        return ResultRow(instance_id=iid, status="ok", answer="x", correct=True, env_outcomes=outcomes)

    rows_ = [row("a", {"web_wall": {"blocked": 2}, "web": {"ok": 1}}), row("b", {"web": {"blocked": 3}}),
             row("c", {})]
    report = build_report(rows_, ["a", "b", "c"], leaked_containers=0)
    assert report.walls() == {"a": 2}  # b's are the leakage guard's blocks, not walls
    assert "blocked by the web: 1 of 3 instance(s) met a CAPTCHA or bot wall (2 response(s)): a" in end_lines(report)
