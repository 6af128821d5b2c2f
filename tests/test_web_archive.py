"""Reproducible web (issue 22): the run's mitmproxy records what real Chromium in real sandboxes loads
from the offline site (over HTTP, and over HTTPS with the site's own certificate: interception by the
run's CA), and replays it with the site gone; an unrecorded URL is a web_miss; the CA is trusted only by
the run's sandboxes. The matching and wall rules (harness/web/rules.py) by hand."""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
from pathlib import Path

import pytest

from harness.environments.web import WebEnv
from harness.sandbox.contract import SandboxSpec
from harness.traces import Tracer, read_trace
from harness.web.rules import blocked, request_key

SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"
ALIAS = "shop.gaia.test"
TLS_SERVE = '''
import runpy, ssl, sys
sys.argv = ["serve.py"]
site = runpy.run_path("/site/plain.py")
server = site["ThreadingHTTPServer"](("0.0.0.0", 443), site["Handler"])
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("/site/cert.pem", "/site/key.pem")
server.socket = context.wrap_socket(server.socket, server_side=True)
print("ready", flush=True)
server.serve_forever()
'''


def test_request_key_sorts_the_query_drops_clocks_and_ignores_headers():
    assert request_key("get", "http://Shop.GAIA.test:80/a?b=2&a=1&_=123") == request_key("GET", "http://shop.gaia.test/a?a=1&b=2")
    assert request_key("GET", "https://x.test/a?a=1") != request_key("GET", "https://x.test/a?a=2")
    assert request_key("GET", "https://x.test:8443/a") != request_key("GET", "https://x.test/a")
    assert request_key("POST", "https://x.test/s", b"q=1") != request_key("POST", "https://x.test/s", b"q=2")
    assert request_key("GET", "https://x.test/a#part") == request_key("GET", "https://x.test/a")


def test_walls_are_recognised_by_markers_and_status():
    assert blocked(200, "text/html", b"<div class='g-recaptcha'></div>") == "g-recaptcha"
    assert blocked(403, "text/html", b"<title>Just a moment...</title>") == "just a moment..."
    assert blocked(200, "text/html", b"<p>Our captcha library docs</p>") is None  # an ordinary page may say it
    assert blocked(403, "image/png", b"\x89PNG captcha") is None


def tls_site(tmp_path: Path) -> Path:
    """The smoke site served over HTTPS on 443 with its own self-signed certificate; returns the folder."""
    site = tmp_path / "tls-site"
    site.mkdir()
    shutil.copy(SMOKE / "website" / "site.toml", site / "site.toml")
    shutil.copy(SMOKE / "website" / "serve.py", site / "plain.py")
    (site / "serve.py").write_text(TLS_SERVE)
    self_signed(site, ALIAS)
    return site


def self_signed(folder: Path, host: str) -> None:
    """A self-signed certificate for `host` in folder/cert.pem, its key in folder/key.pem."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))


def browse(sb, trace: Path, urls: list[str]) -> list[str]:
    async def go():
        web = WebEnv(sb, Tracer(trace), action_timeout=20)
        try:
            return [await web.visit(url) for url in urls]
        finally:
            await web.close()

    return asyncio.run(go())


def records(archive: Path) -> list:
    from warcio.archiveiterator import ArchiveIterator

    with archive.open("rb") as fh:
        return [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), dict(r.rec_headers.headers),
                 r.content_stream().read()) for r in ArchiveIterator(fh)]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_record_then_replay_with_the_site_gone(provider, image, run_id, tmp_path, scheme):

    site = SMOKE / "website" if scheme == "http" else tls_site(tmp_path)
    upstream = (site / "cert.pem").read_bytes() if scheme == "https" else None
    archive = tmp_path / "run" / "web" / "rec.warc.gz"
    pages = [f"{scheme}://{ALIAS}/about", f"{scheme}://{ALIAS}/catalog?page=2"]
    with provider.website(site, image, run_id) as policy, \
            provider.web_proxy("record", run_id, policy, out=archive, upstream_ca=upstream) as proxy:
        assert proxy.mode == "record"
        with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="rec", attempt=2,
                                       network=policy)) as sb:
            live = browse(sb, tmp_path / "rec.jsonl", pages)
            # The run's CA is trusted by the browser of the run's sandbox alone: the sandbox's own
            # TLS clients (and the host) refuse the proxy's certificates.
            if scheme == "https":
                other = sb.shell(f"python3 -c \"import urllib.request as u; u.build_opener(u.ProxyHandler("
                                 f"{{'https': 'http://{proxy.address}:8080'}})).open('https://{ALIAS}/about', "
                                 f"timeout=20)\"")
                assert other.exit_code != 0 and "CERTIFICATE_VERIFY_FAILED" in other.stderr + other.stdout
    assert "Founded in 1987" in live[0], live[0][:500]
    assert "Catalog (page 2 of 3)" in live[1], live[1][:500]
    found = records(archive)
    responses = {uri: (head, body) for kind, uri, head, body in found if kind == "response"}
    assert {kind for kind, *_ in found} == {"request", "response"}
    for page in pages:
        head, body = responses[page]
        assert head["WARC-Harness-Instance"] == "rec/2" and "WARC-Harness-Timing" in head
        assert head["WARC-Harness-Key"] == request_key("GET", page)
    assert b"Founded in 1987" in responses[pages[0]][1]
    assert not list(Path("/usr/local/share/ca-certificates").glob("*harness*"))  # never the host's store

    # Replay: no site, the proxy's own internal network; the same pages, and a miss for a new one.
    with provider.web_proxy("replay", run_id + "r", None, archives=(archive,)) as proxy:
        policy = f"internal:{proxy.network}"
        with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="replay", network=policy)) as sb:
            again = browse(sb, tmp_path / "replay.jsonl", [*pages, f"{scheme}://{ALIAS}/product/TOO-101"])
    assert again[:2] == live
    assert "Not recorded" in again[2]
    events = [e for e in read_trace(tmp_path / "replay.jsonl") if e.type == "env" and e.env == "web_archive"]
    misses = [e.args["url"] for e in events if e.action == "web_miss"]
    hits = [e.args["url"] for e in events if e.action == "web_hit"]
    assert misses == [f"{scheme}://{ALIAS}/product/TOO-101"] and set(pages) <= set(hits)


@pytest.mark.docker
@pytest.mark.slow
def test_smoke_browsing_instances_replay_to_the_same_answers_with_the_site_gone(tmp_path):
    from tests.helpers.e2e import explain, harness, rows
    from tests.test_replay_divergence import WEB_IDS

    recorded, replayed = tmp_path / "recorded", tmp_path / "replayed"
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--website", SMOKE / "website", "--ids",
                   ",".join(WEB_IDS), "--output-dir", recorded, "--workers", 2, "--web-record",
                   "--fail-on-divergence", timeout=600)
    assert proc.returncode == 0, explain(proc)
    assert list((recorded / "web").glob("*.warc.gz"))
    proc = harness("run", "--dataset", SMOKE, "--model", "replay", "--ids", ",".join(WEB_IDS), "--output-dir",
                   replayed, "--workers", 2, "--web-replay", recorded, "--fail-on-divergence", timeout=600)
    assert proc.returncode == 0, explain(proc)
    verdicts = lambda out: {r["instance_id"]: (r["answer"], r["correct"]) for r in rows(out)}  # noqa: E731
    assert verdicts(replayed) == verdicts(recorded) and len(verdicts(recorded)) == len(WEB_IDS)
    for row in rows(replayed):
        assert row["env_outcomes"].get("web_archive", {}).get("miss", 0) == 0, row["env_outcomes"]
        assert row["env_outcomes"]["web_archive"]["hit"] >= 1
