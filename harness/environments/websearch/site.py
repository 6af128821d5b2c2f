"""The `site` provider: BM25 over the run's offline `--website`, crawled once per run.

`crawl(sandbox, alias)` runs a stdlib crawler inside a sandbox on the site's network (the host
cannot reach the site's internal network): from `http://ALIAS/` and the URLs of
`http://ALIAS/sitemap.xml`, following same-host links breadth-first, at most `MAX_PAGES` pages of a
text type (HTML reduced to its title and visible text), `PAGE_TIMEOUT_S` each (a page that never
answers is skipped). `build_index(pages, folder)` splits each page into passages of about
`PASSAGE_WORDS` words and saves a bm25s index with them under the run directory; `SiteIndex`
loads it in each agent's process and answers a query with one hit per page (its best passage as
the snippet), best first. Nothing here makes a request at search time.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.environments.websearch.providers import Hit
from harness.errors import InfraError
from harness.sandbox.contract import Sandbox, SandboxProvider, SandboxSpec

MAX_PAGES = 500
PAGE_TIMEOUT_S = 5
PASSAGE_WORDS = 150
PASSAGES = "passages.json"  # beside bm25s's own files: the passages its ids point at

CRAWL = r"""
import collections, html.parser, json, sys, urllib.parse, urllib.request, xml.etree.ElementTree as ET
base, limit, timeout = sys.argv[1].rstrip("/"), int(sys.argv[2]), float(sys.argv[3])
host = urllib.parse.urlsplit(base).netloc

class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(); self.title, self.text, self.links, self._skip, self._in_title = "", [], [], 0, False
    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "noscript", "template"): self._skip += 1
        if tag == "title": self._in_title = True
        href = dict(attrs).get("href")
        if tag == "a" and href: self.links.append(href)
    def handle_endtag(self, tag):
        if tag in ("script", "style", "noscript", "template"): self._skip = max(0, self._skip - 1)
        if tag == "title": self._in_title = False
    def handle_data(self, data):
        if self._in_title: self.title += data
        elif not self._skip: self.text.append(data)

def fetch(url):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.geturl(), resp.headers.get_content_type(), resp.read(4 << 20).decode("utf-8", "replace")

def same_site(url):
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("http", "https") and parts.netloc == host

queue, seen, pages = collections.deque([base + "/"]), {base + "/"}, []
try:
    _, _, sitemap = fetch(base + "/sitemap.xml")
    for loc in ET.fromstring(sitemap).iter():
        if loc.tag.endswith("loc") and loc.text and same_site(loc.text.strip()) and loc.text.strip() not in seen:
            seen.add(loc.text.strip()); queue.append(loc.text.strip())
except Exception:
    pass
while queue and len(pages) < limit:
    url = queue.popleft()
    try:
        final, ctype, body = fetch(url)
    except Exception:
        continue
    if not ctype.startswith("text/"):
        continue
    title, text = "", body
    if ctype == "text/html":
        parser = Page(); parser.feed(body)
        title, text = " ".join(parser.title.split()), " ".join(" ".join(parser.text).split())
        for href in parser.links:
            link = urllib.parse.urldefrag(urllib.parse.urljoin(final, href))[0]
            if same_site(link) and link not in seen:
                seen.add(link); queue.append(link)
    pages.append({"url": final, "title": title or final, "text": text})
print(json.dumps(pages))
"""


def crawl(sandbox: Sandbox, alias: str, *, limit: int = MAX_PAGES) -> list[dict]:
    """The site's pages ({url, title, text}), crawled from inside `sandbox` (module docstring)."""
    result = sandbox.exec(["python3", "-c", CRAWL, f"http://{alias}", str(limit), str(PAGE_TIMEOUT_S)],
                          timeout=600, max_output=256 * 1024 * 1024)
    try:
        pages = json.loads(result.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise InfraError(f"crawling the website {alias} failed (exit {result.exit_code}): "
                         f"{result.stderr[-1000:]}") from None
    if not pages:
        raise InfraError(f"crawling the website {alias} found no page (http://{alias}/ did not answer)")
    return pages


def _passages(pages: list[dict]) -> list[dict]:
    out = []
    for page in pages:
        words = str(page.get("text", "")).split()
        for start in range(0, max(len(words), 1), PASSAGE_WORDS):
            out.append({"url": page["url"], "title": page.get("title") or page["url"],
                        "text": " ".join(words[start:start + PASSAGE_WORDS])})
    return out


def build_index(pages: list[dict], folder: Path) -> int:
    """Index the pages' passages with bm25s into `folder`; returns the number of passages."""
    import bm25s

    passages = _passages(pages)
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([f"{p['title']} {p['text']}" for p in passages], stopwords="en",
                                   show_progress=False), show_progress=False)
    folder.mkdir(parents=True, exist_ok=True)
    retriever.save(str(folder))
    (folder / PASSAGES).write_text(json.dumps(passages), encoding="utf-8")
    return len(passages)


class SiteIndex:
    """The saved index of build_index, loaded once per agent process."""

    def __init__(self, folder: Path):
        import bm25s

        self.retriever = bm25s.BM25.load(str(folder), show_progress=False)
        self.passages = json.loads((folder / PASSAGES).read_text(encoding="utf-8"))

    def search(self, query: str, n: int) -> list[Hit]:
        import bm25s

        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self.retriever.retrieve(tokens, k=min(len(self.passages), max(n * 4, 20)), show_progress=False)
        out: dict[str, Hit] = {}
        for i, score in zip(docs[0], scores[0], strict=True):
            doc = self.passages[int(i)]
            if score > 0 and doc["url"] not in out:
                out[doc["url"]] = Hit(doc["title"], doc["url"], doc["text"][:400])
        return list(out.values())[:n]


def index_site(provider: SandboxProvider, spec: SandboxSpec, alias: str, folder: Path) -> tuple[int, int]:
    """Crawl the site from a sandbox of `spec` (on the site's network; removed after) and index it into
    `folder`, once per run before the first instance; (pages, passages)."""
    sandbox = provider.start(spec)
    try:
        pages = crawl(sandbox, alias)
    finally:
        provider.teardown(sandbox)
    return len(pages), build_index(pages, folder)
