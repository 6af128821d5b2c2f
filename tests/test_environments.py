"""The file and browser environments inside real sandboxes (real markitdown, real Chromium)."""

from __future__ import annotations

import asyncio
import base64
import zlib
from pathlib import Path

import pytest

from harness.environments.files import FileEnv
from harness.environments.web import WebEnv
from harness.sandbox.contract import SandboxSpec
from harness.traces import Tracer, read_trace

pytestmark = pytest.mark.docker
SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"
DOCS = SMOKE / "2023" / "validation"


def tiny_png() -> bytes:
    raw = b"\x00\xff\x00\x00"  # one red pixel, filter byte first
    chunk = lambda kind, data: (len(data).to_bytes(4, "big") + kind + data  # noqa: E731
                                + zlib.crc32(kind + data).to_bytes(4, "big"))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", (1).to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00")
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.fixture
def files_sandbox(provider, image, run_id, tmp_path):
    root = tmp_path / "task"
    root.mkdir()
    for name, content in {"page.html": "<html><body><h1>Quarterly</h1><table><tr><td>alpha</td><td>42</td></tr>"
                                       "</table></body></html>", "data.csv": "name,qty\nwidget,7\n",
                          "long.txt": "".join(f"line {i} filler text\n" for i in range(2000)),
                          "blob.bin": base64.b64decode("AAECAwQFBgcICf8=").decode("latin-1")}.items():
        (root / name).write_text(content, encoding="latin-1")
    (root / "pixel.png").write_bytes(tiny_png())
    names = ["page.html", "data.csv", "long.txt", "blob.bin", "pixel.png"]
    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="files")) as sb:
        sb.copy_in(root, names)
        sb.copy_in(DOCS, ["brightwater_annual_report_2023.pdf", "project_falcon_minutes.docx",
                          "kitchen_renovation_plan.xlsx", "regional_review_h1_2023.pptx",
                          "warehouse_inventory.json", "card_transactions_q3_2023.zip"])
        sb.shell("ln -s /etc/passwd /workspace/escape && mkdir /workspace/sub")
        yield sb


def test_file_env_converts_documents_inside_the_sandbox_with_paging_find_and_cache(files_sandbox, tmp_path):
    trace = tmp_path / "t.jsonl"
    env = FileEnv(files_sandbox, Tracer(trace), page_size=2000)
    expected = {"page.html": "| alpha | 42 |", "data.csv": "widget",
                "brightwater_annual_report_2023.pdf": "Brightwater", "project_falcon_minutes.docx": "Falcon",
                "kitchen_renovation_plan.xlsx": "|", "regional_review_h1_2023.pptx": "Slide",
                "warehouse_inventory.json": "{", "card_transactions_q3_2023.zip": ".csv"}
    for name, needle in expected.items():
        text = env.read(name)
        assert not text.startswith("Error"), (name, text[:300])
        assert needle.lower() in text.lower(), (name, text[:500])
    assert "pixel.png" in env.list_files()
    assert "ImageSize: 1x1" in env.read("pixel.png")  # images: their metadata (exiftool)
    first, last = env.read("long.txt"), env.read("long.txt", page=999)
    assert first.startswith("[long.txt: page 1 of ") and "line 0 " in first
    pages = int(first.split(" of ")[1].split("]")[0])
    assert pages > 10 and last.startswith(f"[long.txt: page {pages} of {pages}]") and "line 1999" in last
    assert "page 1: " in env.find("long.txt", "line 5 filler") and "not found" in env.find("long.txt", "zebra")
    # Cached: the sandbox is asked only whether the file changed, not to convert it again.
    calls = []
    real_exec = files_sandbox.exec
    files_sandbox.exec = lambda argv, **kw: calls.append(argv) or real_exec(argv, **kw)
    try:
        env.read("brightwater_annual_report_2023.pdf", page=2)
    finally:
        files_sandbox.exec = real_exec
    assert len(calls) == 1 and len(calls[0]) == 5  # the cache key was sent along
    files_sandbox.shell("echo changed >> /workspace/data.csv")
    assert "changed" in env.read("data.csv")  # a changed file is converted again
    assert any(getattr(e, "action", None) == "read" for e in read_trace(trace))


@pytest.mark.parametrize("path", ["../etc/passwd", "/etc/passwd", "escape", "sub/../../etc/shadow", "nope.pdf", "sub"])
def test_file_env_confines_paths_to_the_workspace(files_sandbox, path):
    text = FileEnv(files_sandbox, Tracer(None)).read(path)
    assert text.startswith("Error:"), text[:300]
    assert "root:x:0:0" not in text


def test_browser_reads_are_confined_to_the_container(provider, image, run_id):
    host_passwd = Path("/etc/passwd").read_text()
    assert "agent:x:1000" not in host_passwd

    async def go(sb):
        web = WebEnv(sb, Tracer(None))
        try:
            return await web.visit("file:///etc/passwd")
        finally:
            await web.close()

    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="web-file")) as sb:
        text = asyncio.run(go(sb))
    assert "agent:x:1000" in text  # the container's file, not the host's


def test_network_none_cannot_reach_the_offline_site(provider, image, run_id):
    async def go(sb):
        web = WebEnv(sb, Tracer(None), action_timeout=10)
        try:
            return await web.visit("http://shop.gaia.test/")
        finally:
            await web.close()

    with provider.website(SMOKE / "website", image, run_id), \
            provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="no-net")) as sb:
        assert asyncio.run(go(sb)).startswith("Error")


def test_browser_actions_on_the_offline_site(provider, image, run_id, tmp_path):
    trace = tmp_path / "t.jsonl"

    async def go(sb):
        web = WebEnv(sb, Tracer(trace), screenshots=tmp_path / "shots", action_timeout=8)
        out = {}
        try:
            out["home"] = await web.visit("shop.gaia.test")
            out["search"] = await web.type_text("Search products", "hose")
            out["product"] = await web.click("Hose Reel Cart")
            out["find"] = await web.find("Warranty")
            out["back"] = await web.back()
            out["reports"] = await web.visit("http://shop.gaia.test/reports")
            out["download"] = await web.download("Supplier deliveries 2023 (CSV)")
            out["shot"] = await web.screenshot()
            out["slow"] = await web.visit("http://shop.gaia.test/slow")
            out["after_slow"] = await web.visit("http://shop.gaia.test/catalog?page=3")
            out["down"] = await web.page_down()
            sb.shell("pkill -9 -f chromium; sleep 0.5")
            out["crashed"] = await web.visit("http://shop.gaia.test/about")
            out["restarted"] = await web.visit("http://shop.gaia.test/about")
        finally:
            await web.close()
        return out

    with provider.website(SMOKE / "website", image, run_id) as policy, \
            provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="web", network=policy)) as sb:
        out = asyncio.run(go(sb))
        listing = sb.shell("head -2 /workspace/downloads/supplier-deliveries-2023.csv").stdout
    assert "[input Search products]" in out["home"] and "Links:" in out["home"]
    assert "Hose Reel Cart" in out["search"] and "Soaker Hose" in out["search"]
    assert "Warranty" in out["product"] and "5 years" in out["product"]
    assert "page 1:" in out["find"]
    assert "Search results" in out["back"]
    assert "/workspace/downloads/supplier-deliveries-2023.csv" in out["download"]
    assert listing.startswith("date,supplier,sku,quantity")
    assert list((tmp_path / "shots").glob("*.png"))
    assert out["slow"].startswith("Error (timeout)")
    assert "Catalog (page 3 of 3)" in out["after_slow"]
    assert out["crashed"].startswith("Error (crashed)")
    assert "Founded in 1987" in out["restarted"]
    outcomes = [e.outcome for e in read_trace(trace) if e.type == "env" and e.env == "web"]
    assert {"ok", "timeout", "crashed"} <= set(outcomes)


def test_browser_recovers_from_a_crashed_page_a_popup_and_a_hostile_page(provider, image, run_id):
    pages = {
        "popup.html": "<a href='target.html' target='_blank'>open new tab</a>",
        "target.html": "<h1>Target page</h1>",
        "hostile.html": "<script>String.prototype.trim = function () { return 12345 }</script><p>hi</p>",
    }

    async def go(sb):
        web = WebEnv(sb, Tracer(None), action_timeout=8)
        out = {}
        try:
            opened = await web.visit("file:///workspace/site/popup.html")
            out["popup"] = await web.click("open new tab") if opened else ""
            out["hostile"] = await web.visit("file:///workspace/site/hostile.html")
            out["crash"] = await web.visit("chrome://crash")
            out["after"] = await web.visit("file:///workspace/site/target.html")
            out["tabs"] = len(web._page.context.pages)
        finally:
            await web.close()
        return out

    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="web-hostile")) as sb:
        for name, body in pages.items():
            sb.shell(f"mkdir -p /workspace/site && cat > /workspace/site/{name} <<'EOF'\n{body}\nEOF")
        out = asyncio.run(go(sb))
    assert "Target page" in out["popup"] and "target.html" in out["popup"]  # the new tab was followed
    assert not out["hostile"].startswith("Traceback")
    assert out["crash"].startswith("Error (crashed)")
    assert "Target page" in out["after"] and out["tabs"] == 1


def test_the_sites_name_resolves_without_dns(provider, image, run_id):
    """The site's alias is in each sandbox's /etc/hosts: a loaded engine's embedded DNS answered too
    late for the sandboxes' 1 s lookup timeout (Chromium: ERR_NAME_NOT_RESOLVED, now and then)."""
    with provider.website(SMOKE / "website", image, run_id) as policy, \
            provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="hosts", network=policy)) as sb:
        hosts = sb.shell("cat /etc/hosts").stdout
        files_only = sb.shell("getent -s files hosts shop.gaia.test").stdout  # /etc/hosts alone, no DNS
    assert "shop.gaia.test" in hosts
    assert files_only.split()[1:] == ["shop.gaia.test"]


def test_a_failed_download_is_an_error_outcome(provider, image, run_id, tmp_path):
    """Issue 18 item 6: a download that fails reads as an error to the model and counts as `error`
    in the trace (it was `ok`), with the failure's last line, not a list's repr."""
    trace = tmp_path / "t.jsonl"

    async def go(sb):
        web = WebEnv(sb, Tracer(trace), action_timeout=20)
        try:
            return await web.download("http://nowhere.gaia.test/file.csv")
        finally:
            await web.close()

    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="dl-fail")) as sb:
        text = asyncio.run(go(sb))
    assert text.startswith("Error: download of http://nowhere.gaia.test/file.csv failed: ") and "['" not in text, text
    (event,) = [e for e in read_trace(trace) if e.type == "env" and e.action == "download"]
    assert event.outcome == "error", event


def test_a_connection_that_fails_before_it_has_a_page_restarts_the_browser(tmp_path):
    """Pure logic of the action wrapper: the browser connected but its context or tab was refused,
    so there is no page. The action answers 'crashed' and the next one connects again (it raised
    AttributeError on None out of the action)."""
    from playwright.async_api import Error as PlaywrightError

    class Connected:
        def is_connected(self) -> bool:
            return True

    web = WebEnv(None, Tracer(tmp_path / "t.jsonl"), action_timeout=1)

    async def refused() -> None:
        web._browser = Connected()
        raise PlaywrightError("Target.createTarget: refused")

    web._ensure = refused
    text = asyncio.run(web.visit("http://shop.gaia.test/"))
    assert text.startswith("Error (crashed): the browser crashed"), text
    assert web._browser is None and web.restarts == 1
    (event,) = [e for e in read_trace(tmp_path / "t.jsonl") if e.type == "env"]
    assert event.action == "visit" and event.outcome == "crashed", event
