"""The browser environment: Chromium inside the sandbox, driven by Playwright from the harness.

Chromium starts lazily on the first action (sandboxd launches it, DevTools on the
container's 127.0.0.1), and Playwright connects over CDP through the instance's one
published port. Pages are serialized to text by a script running in the browser, so
page content never reaches a parser on the host. Every action has a short timeout;
a page that does not answer is reported as `timeout`, a dead browser is restarted
and reported as `crashed`, an action that fails (no such link, a failed download) as `error`.
Downloads land in /workspace/downloads inside the sandbox; download_file's own request goes through the
run's web proxy as the browser's do (proxied.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness.environments.paging import find_hits, page_count, page_of
from harness.environments.proxied import archive_note
from harness.environments.redirects import NO_FOLLOW, blocked_message, follow
from harness.errors import InfraError
from harness.sandbox.contract import WORKSPACE, Sandbox
from harness.settings import settings
from harness.traces import EnvAction, Tracer

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page, Playwright

    from harness.environments.images import ImageEnv
    from harness.environments.websearch.guard import Guard

PAGE_JS = (Path(__file__).with_name("page.js")).read_text()
DOWNLOADS = f"{WORKSPACE}/downloads"

FETCH = NO_FOLLOW + r"""
import json, os, re, sys, urllib.parse, urllib.request
url, folder, named = sys.argv[1], sys.argv[2], sys.argv[3]  # named: the URL asked for (its file name)
os.makedirs(folder, exist_ok=True)
with urllib.request.urlopen(url, timeout=30) as resp:
    name = None
    disposition = resp.headers.get("Content-Disposition") or ""
    m = re.search(r'filename="?([^";]+)"?', disposition)
    if m:
        name = m.group(1)
    name = os.path.basename(name or urllib.parse.urlsplit(named).path) or "download"
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).lstrip(".") or "download"
    path = os.path.join(folder, name)
    with open(path, "wb") as fh:
        fh.write(resp.read())
print(json.dumps({"path": path, "bytes": os.path.getsize(path), "url": resp.geturl(),
                  "archive": resp.headers.get("X-Harness-Web")}))
"""


class ActionFailed(Exception):
    """An action that could not do what it was asked (a download that failed): its trace outcome
    is `error` (or `timeout`), and the model reads the message."""

    def __init__(self, message: str, outcome: str = "error"):
        super().__init__(message)
        self.outcome = outcome


class WebEnv:
    # The leakage guard (environments/websearch/guard.py), set by the agent's process: a URL it blocks is
    # never requested by visit_url or download_file, a page that lands on one (a click, a redirect) is
    # left for about:blank before its text is read, and a download that ends on one (download_file
    # redirected, a click the browser saves) is deleted unread: the agent sees none. Each is a `guard` event.
    guard: Guard | None = None

    def __init__(self, sandbox: Sandbox, tracer: Tracer, *, screenshots: Path | None = None, page_size: int = 6000,
                 action_timeout: float | None = None, images: ImageEnv | None = None):
        # One browser action (navigation, click, serialization). Pages on the offline
        # network answer in milliseconds; a page that takes longer is stuck, not slow.
        self.sandbox, self.tracer, self.page_size = sandbox, tracer, page_size
        self.screenshots = screenshots
        self.images = images  # a vision model's pictures: a screenshot is shown to it (environments/images.py)
        self.action_timeout = action_timeout or settings().browser_action_timeout
        self._pw: Playwright | None = None
        self._browser: Browser | None = None
        self._page: Page | None = None
        self._text, self._url, self._title, self._page_no = "", "", "", 1
        self._downloads: dict[str, dict] = {}
        self._hops: list[str] = []  # the URLs a navigation was redirected through during the current action
        self.restarts = 0
        self._abandoned = False  # the browser is stuck (not disconnected): restart it by force

    # ------------------------------------------------------------------ connection
    async def _connect(self) -> None:
        from playwright.async_api import async_playwright

        ws_path = await asyncio.to_thread(self.sandbox.start_browser, self._abandoned)
        self._abandoned = False
        conn = self.sandbox.connection()
        if self._pw is None:
            self._pw = await async_playwright().start()
        self._browser = await self._pw.chromium.connect_over_cdp(
            conn.url(ws_path, scheme="ws"), headers=dict(conn.headers), timeout=self.action_timeout * 1000)
        context = self._browser.contexts[0] if self._browser.contexts else await self._browser.new_context()
        self._page = context.pages[0] if context.pages else await context.new_page()
        for extra in context.pages[1:]:  # tabs left by an earlier connection
            await extra.close()
        context.on("response", self._archive_note)
        context.on("request", self._note_hop)
        cdp = await self._browser.new_browser_cdp_session()
        await cdp.send("Browser.setDownloadBehavior",
                       {"behavior": "allow", "downloadPath": DOWNLOADS, "eventsEnabled": True})
        cdp.on("Browser.downloadWillBegin", lambda e: self._downloads.setdefault(e["guid"], {}).update(
            name=e.get("suggestedFilename"), url=e.get("url")))
        cdp.on("Browser.downloadProgress", lambda e: self._downloads.setdefault(e["guid"], {}).update(
            state=e.get("state")))

    def _note_hop(self, request) -> None:
        """A navigation redirected (each hop is a request of its own): its URL, checked by _act."""
        if request.redirected_from is not None and request.is_navigation_request():
            self._hops.append(request.url)

    def _archive_note(self, response) -> None:
        """What the run's web proxy (sandbox/docker/webproxy.py) said of a response: a replayed hit or a
        `web_miss` (env `web_archive`), a CAPTCHA or bot wall (env `web_wall`, outcome `blocked`: an env of its
        own, so the report counts walls apart from the leakage guard's blocks of env `web`)."""
        archive_note(self.tracer, response.headers.get("x-harness-web"), response.url, response.request.method)
        if wall := response.headers.get("x-harness-web-blocked"):
            self.tracer.emit(EnvAction(env="web_wall", action="web_blocked", outcome="blocked",
                                       args={"url": response.url, "marker": wall, "status": response.status}))

    async def _ensure(self) -> None:
        if self._browser is None or not self._browser.is_connected():
            await self._connect()

    async def playwright(self):
        """(Playwright, BrowserContext) of the sandbox's browser, e.g. for AutoGen's
        MultimodalWebSurfer(playwright=..., context=...)."""
        await self._ensure()
        return self._pw, self._page.context

    async def close(self) -> None:
        if self._pw is not None:
            try:
                await self._pw.stop()
            except Exception:  # noqa: BLE001 - an agent (e.g. MultimodalWebSurfer) may have stopped it
                pass
        self._pw = self._browser = self._page = None

    # ------------------------------------------------------------------ action wrapper
    async def _act(self, action: str, args: dict, body) -> str:
        from playwright.async_api import Error as PlaywrightError

        started = time.monotonic()
        outcome = "ok"
        try:
            await self._ensure()
            self._hops = []
            text = await asyncio.wait_for(body(), self.action_timeout)
            for landed in [*self._hops, self._url]:  # a page reached through a blocked hop is refused too
                if (pattern := self._blocked(landed)) is not None:
                    await self._leave_blocked()
                    raise ActionFailed(blocked_message(landed, pattern), "blocked")
        except TimeoutError:
            outcome = "timeout"
            text = (f"Error (timeout): the page did not respond within {self.action_timeout:.0f}s. "
                    "It may be blocking the browser; try another page.")
            await self._fresh_page()
        except PlaywrightError as exc:
            message = str(exc).lower()
            # No page: the connection failed before it had one (a context or tab refused): start again.
            if self._browser is None or not self._browser.is_connected() or "closed" in message or self._page is None:
                outcome = "crashed"
                self.restarts += 1
                self._browser = None
                text = ("Error (crashed): the browser crashed; it is restarted on the next action and page state "
                        "was lost.")
            elif "crash" in message or self._page.is_closed():
                outcome = "crashed"
                await self._fresh_page()
                text = "Error (crashed): the page crashed and was replaced by a blank one."
            else:
                outcome = "error"
                text = f"Error: {str(exc).splitlines()[0]}"
        except LookupError as exc:
            outcome, text = "error", f"Error: {exc}"
        except ActionFailed as exc:
            outcome, text = exc.outcome, f"Error: {exc}"
        except InfraError:
            raise
        except Exception as exc:  # noqa: BLE001 - pages control what the browser returns
            outcome, text = "error", f"Error: {type(exc).__name__}: {exc}"
        self.tracer.emit(EnvAction(env="web", action=action, args=args, outcome=outcome,
                                   seconds=round(time.monotonic() - started, 4), url=self._url, result=text[:2000]))
        return text

    def _blocked(self, url: str) -> str | None:
        """The guard's pattern that blocks `url` (traced as a `guard` event), or None."""
        pattern = self.guard.blocks(url) if self.guard is not None and url else None
        if pattern is not None:
            self.tracer.emit(EnvAction(env="guard", action="block", outcome="blocked",
                                       args={"url": url, "pattern": pattern, "source": "browser"}))
        return pattern

    async def _leave_blocked(self) -> None:
        await self._current.goto("about:blank", timeout=self.action_timeout * 1000)
        self._text, self._url, self._title, self._page_no = "", "about:blank", "", 1

    async def _fresh_page(self) -> None:
        """Replace a stuck or crashed page, and every other tab (popups share its renderer)."""
        try:
            if self._page is not None:
                context = self._page.context
                new = await asyncio.wait_for(context.new_page(), 5)
                for page in context.pages:
                    if page is not new:
                        await asyncio.wait_for(page.close(), 5)
                self._page = new
        except Exception:  # noqa: BLE001 - a browser this stuck is restarted, by force, on the next action
            self._browser, self._abandoned = None, True

    @property
    def _current(self) -> Page:
        """The page the actions work on: _ensure, which every action runs first, connects and sets it."""
        assert self._page is not None, "a browser action ran before _ensure"
        return self._page

    # ------------------------------------------------------------------ page text
    async def _snapshot(self) -> None:
        data = await self._current.evaluate(PAGE_JS)
        if not isinstance(data, dict):  # the page can tamper with the built-ins the script uses
            data = {}
        self._text = str(data.get("text", ""))[:5_000_000]
        self._url, self._title = str(data.get("url", self._current.url))[:2000], str(data.get("title", ""))[:500]
        self._page_no = 1

    def _view(self) -> str:
        pages = page_count(self._text, self.page_size)
        self._page_no = min(max(1, self._page_no), pages)
        chunk = page_of(self._text, self.page_size, self._page_no)
        return f"Title: {self._title}\nURL: {self._url}\n[page {self._page_no} of {pages}]\n\n{chunk}"

    async def _settle(self) -> None:
        try:
            await self._current.wait_for_load_state("domcontentloaded", timeout=self.action_timeout * 500)
        except Exception:  # noqa: BLE001 - a page that never settles is still shown as it is
            pass
        await self._snapshot()

    # ------------------------------------------------------------------ actions
    async def visit(self, url: str) -> str:
        async def body():
            target = url if re.match(r"^[a-z][a-z0-9+.-]*:", url, re.I) else f"http://{url}"
            if (pattern := self._blocked(target)) is not None:
                raise ActionFailed(blocked_message(target, pattern), "blocked")
            await self._page.goto(target, wait_until="domcontentloaded", timeout=self.action_timeout * 1000)
            await self._snapshot()
            return self._view()
        return await self._act("visit", {"url": url}, body)

    async def read_page(self, page: int | None = None) -> str:
        async def body():
            if page is not None:
                self._page_no = page
            return self._view()
        return await self._act("read_page", {"page": page}, body)

    async def page_down(self) -> str:
        self._page_no += 1
        return await self.read_page()

    async def page_up(self) -> str:
        self._page_no -= 1
        return await self.read_page()

    async def find(self, text: str) -> str:
        async def body():
            hits = find_hits(self._text, text, self.page_size)
            return "\n".join(hits) if hits else f"{text!r} not found on {self._url}"
        return await self._act("find", {"text": text}, body)

    async def _find(self, target: str, *, field: bool = False):
        """A [N] reference from the page view, or an element by its visible text or label.

        Fails at once (not after the action timeout) when nothing on the page matches."""
        target = target.strip().strip("[]")
        page = self._current
        if target.isdigit():
            candidates = [page.locator(f'[data-harness-ref="{target}"]')]
        elif field:
            candidates = [page.get_by_label(target), page.get_by_placeholder(target),
                          page.get_by_role("textbox", name=target), page.locator(f'[name="{target}"]')]
        else:
            candidates = [page.get_by_role("link", name=target), page.get_by_role("button", name=target),
                          page.get_by_text(target)]
        for locator in candidates:
            if await locator.count():
                return locator.first
        raise LookupError(f"nothing on {self._url} matches {target!r}; use a [N] reference from the page view")

    async def click(self, target: str) -> str:
        async def body():
            before, pages_before = set(self._downloads), set(self._page.context.pages)
            await (await self._find(target)).click(timeout=self.action_timeout * 1000)
            await asyncio.sleep(0.2)
            new = [g for g in self._downloads if g not in before]
            if new:
                return await self._await_download(new[0])
            opened = [p for p in self._page.context.pages if p not in pages_before]
            if opened:  # a new tab or popup: follow it, close the old tab
                old, self._page = self._page, opened[-1]
                await old.close()
            await self._settle()
            return self._view()
        return await self._act("click", {"target": target}, body)

    async def type_text(self, target: str, text: str, submit: bool = True) -> str:
        async def body():
            field = await self._find(target, field=True)
            await field.fill(text, timeout=self.action_timeout * 1000)
            if submit:
                await field.press("Enter")
            await self._settle()
            return self._view()
        return await self._act("type_text", {"target": target, "text": text, "submit": submit}, body)

    async def back(self) -> str:
        async def body():
            # A page restored from the back/forward cache fires no load events (and Playwright would
            # wait for them): it is complete as it is, so read it at once.
            await self._page.go_back(wait_until="commit", timeout=self.action_timeout * 1000)
            await self._snapshot()
            return self._view()
        return await self._act("back", {}, body)

    async def _await_download(self, guid: str) -> str:
        while self._downloads[guid].get("state") not in ("completed", "canceled"):
            await asyncio.sleep(0.05)
        item = self._downloads[guid]
        if item["state"] != "completed":
            raise ActionFailed(f"download of {item.get('url')} was canceled")
        if (pattern := self._blocked(item.get("url") or "")) is not None:  # a click that downloads a blocked URL
            await asyncio.to_thread(self.sandbox.exec, ["rm", "-f", "--", f"{DOWNLOADS}/{item.get('name')}"],
                                    timeout=30)
            raise ActionFailed(blocked_message(item["url"], pattern), "blocked")
        return f"Downloaded {item.get('url')} to {DOWNLOADS}/{item.get('name')}"

    async def download(self, target: str) -> str:
        """Fetch a URL (or the link with this reference/text) into /workspace/downloads, inside the sandbox."""
        async def body():
            url = target
            if not re.match(r"^[a-z][a-z0-9+.-]*://", target, re.I):
                url = await (await self._find(target)).evaluate("el => el.href")
            if (pattern := self._blocked(url)) is not None:
                raise ActionFailed(blocked_message(url, pattern), "blocked")
            got = await asyncio.to_thread(follow, lambda hop: self._download_hop(hop, url), url,
                                    self._blocked)
            archive_note(self.tracer, got.pop("archive", None), got.get("url", url))
            if "error" in got:
                raise ActionFailed(got["error"], got.get("outcome", "error"))
            path, size = got["path"], got["bytes"]
            return f"Downloaded {url} to {path} ({size} bytes)"
        return await self._act("download", {"target": target}, body)

    def _download_hop(self, url: str, named: str) -> dict:
        """One hop of download_file (redirects.py): the script's reply, or {"error": ...}; the file is named
        after `named`, the URL asked for."""
        result = self.sandbox.exec(["python3", "-c", FETCH, url, DOWNLOADS, named], timeout=self.action_timeout)
        if result.timed_out:
            return {"error": f"download of {url} took longer than {self.action_timeout:.0f}s", "outcome": "timeout"}
        if result.exit_code != 0:
            why = (result.stderr.strip().splitlines() or [result.stdout.strip() or f"exit {result.exit_code}"])[-1]
            return {"error": f"download of {url} failed: {why}"}
        return json.loads(result.stdout.strip().splitlines()[-1])

    async def screenshot(self) -> str:
        async def body():
            png = await self._page.screenshot(timeout=self.action_timeout * 1000)
            where = "a screenshot not kept (no trace directory)"
            if self.screenshots is not None:
                self.screenshots.mkdir(parents=True, exist_ok=True)
                path = self.screenshots / f"shot-{int(time.time() * 1000)}.png"
                path.write_bytes(png)
                where = f"{self.screenshots.name}/{path.name}"  # beside the instance's trace
            if self.images is not None:  # a vision model sees it: the caption names it, the runner shows it
                return f"{self.images.screenshot(png, where).caption} Current page: {self._url}"
            if self.screenshots is None:
                return "Screenshot taken (not kept: no trace directory)."
            return f"Screenshot saved to the trace ({path.name}). Current page: {self._url}"
        return await self._act("screenshot", {}, body)
