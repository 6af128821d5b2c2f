"""The `site` provider: BM25 over the run's offline `--website`, crawled once per run.

`crawl(sandbox, alias, block)` runs a stdlib crawler inside a sandbox on the site's network (the host
cannot reach the site's internal network): from `http://ALIAS/` and the URLs of
`http://ALIAS/sitemap.xml`, following same-host links breadth-first, at most `MAX_PAGES` pages of a
text type (HTML reduced to its title and visible text), `PAGE_TIMEOUT_S` each (a page that never
answers is skipped); through the run's web proxy when there is one (--web-record: the crawl is recorded
with the pages the agents load; proxied.py). The run's leakage guard (guard.py, stdlib only, its source
run in the crawler) holds there: redirects are followed one hop at a time (at most redirects.MAX_HOPS) and
a URL or hop it blocks is never requested, so no page reached through a blocked hop is indexed under the
chain's unblocked last URL.
`build_index(pages, folder)` splits each page into passages of about `PASSAGE_WORDS` words and saves a
bm25s index with them under the run directory; `SiteIndex` loads it in each agent's process and answers a
query with one hit per page (its best passage as the snippet), best first. `build_index` writes each
file's SHA-256 last (`MANIFEST`); `index_problem(folder)` checks a recorded index against it, then that it
loads and its passages match its documents, before a --web-replay run searches it (a damaged index was
searched as it was). Nothing here makes a request at search time.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

from harness.environments.proxied import HANDLERS
from harness.environments.redirects import MAX_HOPS
from harness.environments.websearch import guard
from harness.environments.websearch.providers import Hit
from harness.errors import InfraError
from harness.sandbox.contract import Sandbox, SandboxProvider, SandboxSpec

MAX_PAGES = 500
PAGE_TIMEOUT_S = 5
PASSAGE_WORDS = 150
PASSAGES = "passages.json"  # beside bm25s's own files: the passages its ids point at
MANIFEST = "manifest.json"  # each other file's SHA-256, written last

# guard.py's source first (its `from __future__` import must open the script), then the proxy's handlers.
CRAWL = inspect.getsource(guard) + HANDLERS + r"""
import collections, html.parser, json, sys, urllib.error, urllib.parse, urllib.request, xml.etree.ElementTree as ET
base, limit, timeout = sys.argv[1].rstrip("/"), int(sys.argv[2]), float(sys.argv[3])
guard, max_hops, withheld = Guard(tuple(json.loads(sys.argv[4]))), int(sys.argv[5]), set()
host = urllib.parse.urlsplit(base).netloc

class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None  # a 3xx is an HTTPError: fetch follows it itself, hop by hop
opener = urllib.request.build_opener(Stay, *_web_handlers())

class Withheld(Exception):
    pass

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
    for _ in range(max_hops + 1):
        if guard.blocks(url) is not None:
            withheld.add(url)
            raise Withheld(url)
        try:
            with opener.open(url, timeout=timeout) as resp:
                return url, resp.headers.get_content_type(), resp.read(4 << 20).decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            if exc.code not in (301, 302, 303, 307, 308) or not exc.headers.get("Location"):
                raise
            url = urllib.parse.urljoin(url, exc.headers["Location"])
    raise OSError(f"too many redirects: more than {max_hops}")

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
print(json.dumps({"pages": pages, "withheld": sorted(withheld)}))
"""


def crawl(sandbox: Sandbox, alias: str, block: tuple[str, ...], *, limit: int = MAX_PAGES) -> tuple[list[dict], int]:
    """The site's pages ({url, title, text}), crawled from inside `sandbox` (module docstring), and how many
    URLs the leakage guard's `block` patterns withheld."""
    result = sandbox.exec(["python3", "-c", CRAWL, f"http://{alias}", str(limit), str(PAGE_TIMEOUT_S),
                           json.dumps(block), str(MAX_HOPS)], timeout=600, max_output=256 * 1024 * 1024)
    try:
        crawled = json.loads(result.stdout.strip().splitlines()[-1])
        pages, withheld = crawled["pages"], len(crawled["withheld"])
    except (json.JSONDecodeError, IndexError, KeyError, TypeError):
        raise InfraError(f"crawling the website {alias} failed (exit {result.exit_code}): "
                         f"{result.stderr[-1000:]}") from None
    if not pages:
        raise InfraError(f"crawling the website {alias} found no page (http://{alias}/ did not answer)")
    return pages, withheld


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
    sums = {f.name: _sha256(f) for f in sorted(folder.iterdir()) if f.is_file() and f.name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps(sums, indent=1), encoding="utf-8")
    return len(passages)


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def index_problem(folder: Path) -> str | None:
    """What is wrong with the saved index in `folder`, naming the file, or None (module docstring). An index
    saved before the manifest existed is checked by loading it alone."""
    manifest = folder / MANIFEST
    if manifest.is_file():
        try:
            sums = json.loads(manifest.read_text(encoding="utf-8"))
            named = {str(name): str(digest) for name, digest in sums.items()}
        except (ValueError, AttributeError, OSError) as exc:
            return f"{manifest} is not the index's list of files ({type(exc).__name__}: {exc})"
        for name, digest in named.items():
            if not (folder / name).is_file():
                return f"{folder / name} is missing"
            if _sha256(folder / name) != digest:
                return f"{folder / name} is damaged: its SHA-256 is not the one {MANIFEST} recorded"
    try:
        passages = json.loads((folder / PASSAGES).read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        return f"{folder / PASSAGES} cannot be read ({type(exc).__name__}: {exc})"
    try:
        documents = int(SiteIndex(folder).retriever.scores["num_docs"])
    except Exception as exc:  # noqa: BLE001 - whatever bm25s or numpy raised: it cannot be searched
        return f"{folder} cannot be loaded as a search index ({type(exc).__name__}: {exc})"
    if not isinstance(passages, list) or len(passages) != documents:
        return f"{folder / PASSAGES} does not hold the index's {documents} passages"
    if any(not isinstance(p, dict) or not all(isinstance(p.get(k), str) for k in ("url", "title", "text"))
           for p in passages):
        return f"{folder / PASSAGES}: a passage is not {{url, title, text}}"
    return None


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


def index_site(provider: SandboxProvider, spec: SandboxSpec, alias: str, folder: Path,
               block: tuple[str, ...]) -> tuple[int, int, int]:
    """Crawl the site from a sandbox of `spec` (on the site's network; removed after), the leakage guard's
    `block` patterns held, and index it into `folder`, once per run before the first instance; (pages,
    passages, URLs withheld by the guard)."""
    sandbox = provider.start(spec)
    try:
        pages, withheld = crawl(sandbox, alias, block)
    finally:
        provider.teardown(sandbox)
    return len(pages), build_index(pages, folder), withheld
