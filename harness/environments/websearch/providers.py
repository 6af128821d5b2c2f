"""The hosted search providers' wire formats: one request builder and one result reader each.

Every provider call is one plain HTTP request made through `SearchHTTP.send` (the one client, so a
recorder can sit there: issue 22). What each sends and reads, as the providers document it:

- tavily: POST {base}/search, JSON {query, max_results, ...options}, `Authorization: Bearer KEY`;
  reads `results[]` (title, url, content, published_date);
- serper: POST {base}/search, JSON {q, num, ...options}, `X-API-KEY: KEY`; reads `organic[]`
  (title, link, snippet, date);
- brave: GET {base}/res/v1/web/search?q=&count=&...options, `X-Subscription-Token: KEY`; reads
  `web.results[]` (title, url, description, page_age or age);
- searxng: GET {base}/search?q=&format=json&...options, no key (a self-hosted instance, with the json
  format enabled in its settings.yml); reads `results[]` (title, url, content, publishedDate).

`refusal` reads a failed answer: `key` (401/403, Brave's 422 SUBSCRIPTION_TOKEN_INVALID), `quota`
(402, Tavily's 432/433), `query` (another 4xx: the agent's query was refused), `retry` (429, 5xx).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import httpx

Refusal = Literal["key", "quota", "query", "retry"]
DEFAULT_URLS = {"tavily": "https://api.tavily.com", "serper": "https://google.serper.dev",
                "brave": "https://api.search.brave.com", "searxng": None}
KEYED = ("tavily", "serper", "brave")  # providers that need an API key
MAX_TITLE, MAX_SNIPPET, MAX_FIELD = 300, 1000, 2000  # characters of a result the model reads (its url, date)


@dataclass(frozen=True)
class Hit:
    """One search result as the agent reads it."""

    title: str
    url: str
    snippet: str
    date: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "url": self.url, "snippet": self.snippet, "date": self.date}


Built = tuple[str, str, dict[str, Any]]  # method, path under the base URL, httpx.Request's other arguments


def _tavily(query: str, n: int, key: str | None, options: dict) -> Built:
    return "POST", "/search", {"headers": {"Authorization": f"Bearer {key}"},
                               "json": {"query": query, "max_results": n, **options}}


def _serper(query: str, n: int, key: str | None, options: dict) -> Built:
    return "POST", "/search", {"headers": {"X-API-KEY": key or ""}, "json": {"q": query, "num": n, **options}}


def _brave(query: str, n: int, key: str | None, options: dict) -> Built:
    return "GET", "/res/v1/web/search", {"params": {"q": query, "count": n, **options},
                                         "headers": {"X-Subscription-Token": key or "", "Accept": "application/json"}}


def _searxng(query: str, n: int, key: str | None, options: dict) -> Built:
    return "GET", "/search", {"params": {"q": query, "format": "json", **options},
                              "headers": {"Accept": "application/json"}}


def _text(value: object) -> str:
    return " ".join(str(value or "").split())


def _read(items: object, title: str, url: str, snippet: str, *dates: str) -> list[Hit]:
    """The provider's results as Hits, each field cut to its bound (MAX_TITLE, MAX_SNIPPET, MAX_FIELD)."""
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get(url):
            date = next((str(item[d])[:MAX_FIELD] for d in dates if item.get(d)), None)
            out.append(Hit(_text(item.get(title))[:MAX_TITLE], str(item[url])[:MAX_FIELD],
                           _text(item.get(snippet))[:MAX_SNIPPET], date))
    return out


def _brave_hits(body: dict) -> list[Hit]:
    web = body.get("web")
    return _read(web.get("results") if isinstance(web, dict) else None, "title", "url", "description",
                 "page_age", "age")


READERS: dict[str, Callable[[dict], list[Hit]]] = {
    "tavily": lambda b: _read(b.get("results"), "title", "url", "content", "published_date"),
    "serper": lambda b: _read(b.get("organic"), "title", "link", "snippet", "date"),
    "brave": _brave_hits,
    "searxng": lambda b: _read(b.get("results"), "title", "url", "content", "publishedDate"),
}
BUILDERS = {"tavily": _tavily, "serper": _serper, "brave": _brave, "searxng": _searxng}


def request(provider: str, base: str, query: str, n: int, key: str | None, options: dict) -> httpx.Request:
    import httpx  # here, not at the top: a run's configuration reads this module, and most runs search nothing

    method, path, args = BUILDERS[provider](query, n, key, options)
    return httpx.Request(method, base.rstrip("/") + path, **args)


def hits(provider: str, body: object, n: int) -> list[Hit]:
    """The results of a 200 answer, at most n (a body of another shape has none)."""
    return READERS[provider](body)[:n] if isinstance(body, dict) else []


def refusal(provider: str, response: httpx.Response) -> Refusal:
    """What a non-200 answer means (module docstring)."""
    status = response.status_code
    if status == 429 or status >= 500:
        return "retry"
    if status in (401, 403):
        return "key"
    if status in (402, 432, 433):
        return "quota"
    if provider == "brave" and status == 422 and "SUBSCRIPTION_TOKEN_INVALID" in response.text:
        return "key"
    return "query"


def detail(response: httpx.Response) -> str:
    """The provider's own words for a failed answer, short."""
    try:
        body = response.json()
    except ValueError:
        return _text(response.text)[:300] or response.reason_phrase
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        for field in ("detail", "message", "error", "code"):
            value = inner.get(field) if isinstance(inner, dict) else None
            if value:
                return _text(value if isinstance(value, str) else str(value))[:300]
    return _text(str(body))[:300]
