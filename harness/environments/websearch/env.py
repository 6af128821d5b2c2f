"""`WebSearch`: the environment behind the `web_search` tool, in the agent's process on the host.

One search: the cache (cache.py) or the provider (one HTTP request through `SearchHTTP.send`, or the
site's index), then the leakage guard over the results (guard.py), then numbered, compact text for
the model. Each search is one `env` trace event (env "websearch", action "search": provider, query,
urls returned, `cached`), each blocked result one more (env "guard", outcome "blocked"): both are
counted in the row's and the report's env_outcomes.

Errors, typed: a refused key or a used-up quota (401/403, 402/432/433, a 429 left after the
retries, Brave's SUBSCRIPTION_TOKEN_INVALID) is `SearchRefused`, a `model` error: like the model's
own provider refusing its key, the run's configuration toward a hosted service, not the agent's
doing and not worth another attempt; the instance stops (no answer without the tool it was given).
An outage (connection errors, timeouts, 5xx, 429) is retried `max_retries` times with backoff
(`backoff` s doubling, at most 60 s; a Retry-After of at most 60 s obeyed); one left after that is
`SearchUnavailable`, an infra error: the attempt ends and the runner retries it on a fresh sandbox.
A query the provider refuses (another 4xx) or an empty one is a tool result the agent reads
(outcome `error`). A key variable that is not set is refused before any container (settings.py `check_key`; a
--web-replay run asks for none: it never calls the provider).

`--web-record` / `--web-replay` (web/search_archive.py): each provider exchange is recorded in the
run's web archive, or answered from the recorded ones (an env `web_archive` event `web_hit` each); a
search the recording never made is a tool result the agent reads and a `web_miss` event.

A search a keyed provider answers is a paid call of the instance (models/meter.py `paying`, with the agent's
meter the family hands over): checked before it is sent (--max-instance-cost, the run's --max-cost: a budget
reached stops the instance) and counted at `[search.PROVIDER] price_per_search` in the agent's cost. A cached
or replayed search, or the site's, costs nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from harness.environments.websearch import providers
from harness.environments.websearch.cache import SearchCache, key
from harness.environments.websearch.guard import Guard
from harness.environments.websearch.providers import Hit
from harness.environments.websearch.settings import MAX_RESULTS, SearchSettings
from harness.errors import InfraError, ModelError
from harness.traces import EnvAction, Tracer
from harness.web.search_archive import NotRecorded, SearchRecorder, SearchReplay, redacted

if TYPE_CHECKING:
    from harness.environments.websearch.site import SiteIndex
    from harness.models.meter import Meter

MAX_RETRY_AFTER_S = 60.0
MAX_ANSWER_BYTES = 8 << 20  # a provider's answer, decoded (20 results are a few tens of KB)
DECODED = ("content-encoding", "content-length", "transfer-encoding")  # no longer true of the body read


class SearchRefused(ModelError):
    """The provider refused the key or the quota is used up (env.py's docstring)."""


class SearchUnavailable(InfraError):
    """The provider did not answer, after the retries."""


class QueryRefused(Exception):
    """The provider refused the query itself: the agent reads why."""


class SearchHTTP:
    """The one HTTP client every provider request goes through (`send`: one exchange). With a recorder
    each exchange goes to the run's web archive; with a replay nothing is sent: the archive answers
    (web/search_archive.py; NotRecorded for a request it never saw)."""

    def __init__(self, timeout: float, recorder: SearchRecorder | None = None, replay: SearchReplay | None = None):
        self.client = httpx.Client(timeout=timeout, follow_redirects=False)
        self.timeout, self.recorder, self.replay = timeout, recorder, replay

    def send(self, request: httpx.Request) -> httpx.Response:
        if self.replay is not None:
            return self.replay.answer(request)
        start, ends = time.time(), time.monotonic() + self.timeout
        response = self._bounded(self.client.send(request, stream=True), request, ends)
        if self.recorder is not None:
            self.recorder.record(request, response, start, time.time())
        return response

    def _bounded(self, streamed: httpx.Response, request: httpx.Request, ends: float) -> httpx.Response:
        """The answer read whole (decoded) up to MAX_ANSWER_BYTES and until `ends` (the request's `timeout`
        in all; a read in progress then may take one more `timeout`); beyond either, an httpx error (an
        outage: retried, then SearchUnavailable), so a provider that sends without end, or trickles bytes
        (each read within the timeout), can neither grow the process nor hold the search."""
        body = bytearray()
        try:
            for chunk in streamed.iter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise httpx.ReadError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes (read no further)",
                                          request=request)
                if time.monotonic() > ends:
                    raise httpx.ReadTimeout(f"the answer was still coming after {self.timeout:g} s (read no further)",
                                            request=request)
        finally:
            streamed.close()
        headers = [(k, v) for k, v in streamed.headers.multi_items() if k.lower() not in DECODED]
        return httpx.Response(streamed.status_code, headers=headers, content=bytes(body), request=request,
                              extensions={k: v for k, v in streamed.extensions.items()
                                          if k in ("http_version", "reason_phrase")})


def archive_http(settings: SearchSettings, who: str, secret: str | None) -> SearchHTTP:
    """The client of a --web-record or --web-replay run's searches (settings.web_record / web_replay)."""
    recorder = SearchRecorder(Path(settings.web_record), who, secret) if settings.web_record else None
    replay = SearchReplay([Path(p) for p in settings.web_replay], secret) if settings.web_replay else None
    return SearchHTTP(settings.timeout, recorder, replay)


def _retry_after(response: httpx.Response | None, fallback: float) -> float:
    try:
        value = float((response.headers.get("retry-after") if response is not None else None) or "x")
    except ValueError:
        return fallback
    return value if 0 <= value <= MAX_RETRY_AFTER_S else fallback


def format_hits(provider: str, query: str, hits: list[Hit], blocked: int) -> str:
    """Results as the model reads them: numbered, title, url, date when given, snippet."""
    held = f" ({blocked} result(s) withheld by the leakage guard)" if blocked else ""
    if not hits:
        return f"No results for {query!r}{held}."
    lines = [f"{len(hits)} result(s) for {query!r} ({provider}){held}:"]
    for rank, hit in enumerate(hits, start=1):
        date = f" ({hit.date})" if hit.date else ""
        lines.append(f"[{rank}] {hit.title}{date}\n    {hit.url}\n    {hit.snippet}")
    return "\n".join(lines)


class WebSearch:
    def __init__(self, settings: SearchSettings, tracer: Tracer, http: SearchHTTP | None = None, who: str = ""):
        """`who`: INSTANCE/ATTEMPT, the tag of this process's exchanges in a --web-record archive."""
        self.settings, self.tracer = settings, tracer
        self.guard = Guard(settings.block)
        self.key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
        self.http = http or archive_http(settings, who, self.key)
        self.cache = SearchCache(Path(settings.cache_dir)) if settings.cache_dir else None
        self._site: SiteIndex | None = None
        self.meter: Meter | None = None  # the agent's (the family's `metered`): a provider's search is a paid call

    def _site_hits(self, query: str, n: int) -> list[Hit]:
        from harness.environments.websearch.site import SiteIndex

        if self._site is None:
            if not self.settings.site_index:
                raise SearchUnavailable("the site search has no index (the run did not crawl its --website)")
            self._site = SiteIndex(Path(self.settings.site_index))
        return self._site.search(query, n)

    def _provider_hits(self, query: str, n: int) -> list[Hit]:
        s = self.settings
        assert s.base_url is not None, "resolve() gives every hosted provider its URL"
        wait = s.backoff
        for attempt in range(s.max_retries + 1):
            response: httpx.Response | None = None
            request = providers.request(s.provider, s.base_url, query, n, self.key, s.options)
            try:
                response = self.http.send(request)
            except NotRecorded as exc:
                self.tracer.emit(EnvAction(env="web_archive", action="web_miss", outcome="miss",
                                           args={"url": exc.url, "method": exc.method, "source": "search"}))
                raise QueryRefused(f"this run replays a recorded web (--web-replay) and {s.provider} was never "
                                   f"asked this ({exc}): the recording has no results for it") from None
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if self.http.replay is not None:
                    self.tracer.emit(EnvAction(env="web_archive", action="web_hit", outcome="hit",
                                               args={"url": redacted(request, self.key)[0], "method": request.method,
                                                     "source": "search"}))
                if response.status_code == 200:
                    try:
                        return providers.hits(s.provider, response.json(), n)
                    except ValueError:
                        problem = "the answer is not JSON"
                else:
                    kind = providers.refusal(s.provider, response)
                    said = f"HTTP {response.status_code}: {providers.detail(response)}"
                    if kind == "key":
                        raise SearchRefused(f"{s.provider} refused the key from {s.api_key_env}: {said}")
                    if kind == "quota":
                        raise SearchRefused(f"{s.provider}: the key's quota is used up: {said}")
                    if kind == "query":
                        raise QueryRefused(f"{s.provider} refused the query: {said}")
                    problem = said
            if attempt < s.max_retries:
                time.sleep(_retry_after(response, wait))
                wait = min(wait * 2, MAX_RETRY_AFTER_S)
        if response is not None and response.status_code == 429:
            raise SearchRefused(f"{s.provider}: still rate-limited after {s.max_retries} retries ({problem})")
        raise SearchUnavailable(f"{s.provider} did not answer after {s.max_retries} retries: {problem}")

    def _paid_hits(self, query: str, n: int) -> list[Hit]:
        """`_provider_hits` as one paid call of the instance's meter (a keyed provider asked, not a replay)."""
        if self.meter is None or not self.settings.paid or self.http.replay is not None:
            return self._provider_hits(query, n)
        from harness.usage import Usage

        with self.meter.paying() as pay:
            hits = self._provider_hits(query, n)
            pay(Usage(cost=self.settings.price_per_search or 0.0))
        return hits

    def search(self, query: str, max_results: int | None = None) -> str:
        s = self.settings
        started = time.monotonic()
        n = min(max(1, int(max_results or s.max_results)), MAX_RESULTS)
        args = {"provider": s.provider, "query": query, "max_results": n}
        name = key(s.provider, query, {**s.options, "max_results": n})
        hits = self.cache.get(name) if self.cache is not None and query.strip() else None
        cached = hits is not None
        try:
            if not query.strip():
                raise QueryRefused("the query is empty: say what to search for")
            if hits is None:
                hits = self._site_hits(query, n) if s.provider == "site" else self._paid_hits(query, n)
                if self.cache is not None:
                    self.cache.put(name, hits)
        except QueryRefused as exc:
            self.tracer.emit(EnvAction(env="websearch", action="search", args=args, outcome="error",
                                       seconds=round(time.monotonic() - started, 4), error=str(exc)))
            return f"Error: {exc}"
        except (SearchRefused, SearchUnavailable) as exc:
            self.tracer.emit(EnvAction(env="websearch", action="search", args=args, outcome="error",
                                       seconds=round(time.monotonic() - started, 4), error=str(exc)))
            raise
        kept = self.allowed(hits, f"search:{s.provider}")
        self.tracer.emit(EnvAction(env="websearch", action="search", args=args, outcome="ok", cached=cached,
                                   seconds=round(time.monotonic() - started, 4), urls=[h.url for h in kept],
                                   blocked=len(hits) - len(kept)))
        return format_hits(s.provider, query, kept, len(hits) - len(kept))

    def allowed(self, hits: list[Hit], source: str) -> list[Hit]:
        """The hits the guard lets through; each one it holds back is a `guard` event."""
        kept = []
        for hit in hits:
            pattern = self.guard.blocks(hit.url)
            if pattern is None:
                kept.append(hit)
            else:
                self.tracer.emit(EnvAction(env="guard", action="block", outcome="blocked",
                                           args={"url": hit.url, "pattern": pattern, "source": source}))
        return kept
