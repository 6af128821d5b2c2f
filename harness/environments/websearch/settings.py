"""The run's search choice: `--search PROVIDER`, `--search-block`, `--no-search-cache` and the TOML's `[search]`.

    [search]
    provider = "tavily"          # used when --search is not given
    max_results = 5              # the tool's default number of results (at most 20)
    block = ["example.org/gaia"] # added to the leakage guard's defaults (guard.py)
    cache = true                 # false: every search asks the provider (also --no-search-cache)

    [search.tavily]              # one table per provider: tavily, serper, brave, searxng
    api_key_env = "TAVILY_API_KEY"   # the variable holding the key (defaults: TAVILY_API_KEY,
                                     # SERPER_API_KEY, BRAVE_API_KEY); the key itself is never written
    base_url = "https://api.tavily.com"  # the endpoint (searxng: required, the instance's URL)
    timeout = 30                 # seconds per request
    max_retries = 3              # of an outage (connection errors, 429, 5xx), backoff 1 s doubling
    price_per_search = 0.008     # dollars per search the provider answers (a budget needs it for a keyed one)
    [search.tavily.options]      # extra request fields, sent as given (search_depth, gl, safesearch...)
    search_depth = "basic"

Which provider: `--search`, else `[search] provider`, else `site` when the run has a `--website`
(the offline smoke set searches its own site with no key), else `none` (no tool offered).
`SearchSettings` is frozen and JSON-safe: the run sends it to every agent process (AgentRequest),
with the run directory's cache folder and the site's index folder filled in (`for_run`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from harness.environments.websearch.guard import DEFAULT_BLOCK, block_list, pattern_problem
from harness.environments.websearch.providers import DEFAULT_URLS, KEYED
from harness.errors import InputError, validation_problems
from harness.models.config import HttpUrl

Provider = Literal["none", "tavily", "serper", "brave", "searxng", "site"]
PROVIDERS: tuple[str, ...] = ("none", "tavily", "serper", "brave", "searxng", "site")
DEFAULT_KEY_ENV = {"tavily": "TAVILY_API_KEY", "serper": "SERPER_API_KEY", "brave": "BRAVE_API_KEY"}
MAX_RESULTS = 20
Option = StrictStr | StrictBool | StrictInt | StrictFloat


class ProviderTable(BaseModel):
    """`[search.PROVIDER]`: how to reach one provider."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api_key_env: str | None = None
    base_url: HttpUrl | None = None
    timeout: float = Field(30.0, gt=0)
    max_retries: int = Field(3, ge=0)
    price_per_search: FiniteFloat | None = Field(None, ge=0)
    options: dict[str, Option] = Field(default_factory=dict)


class SearchSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    provider: Provider = "none"
    base_url: str | None = None
    api_key_env: str | None = None
    timeout: float = 30.0
    max_retries: int = 3
    backoff: float = 1.0  # seconds before the first retry of an outage (doubles)
    price_per_search: float | None = None  # dollars per search a provider answers (the meter counts it)
    options: dict[str, Option] = Field(default_factory=dict)
    max_results: int = Field(5, ge=1, le=MAX_RESULTS)
    block: tuple[str, ...] = DEFAULT_BLOCK
    cache: bool = True
    # `site` picked because the run has a --website (no --search, no [search] provider): not in run.json's
    # fingerprint, so a run from before search existed resumes (runner/run_config.py)
    automatic: bool = False
    # Filled in by the run (for_run): where the cache and the site's index live; --web-record's search archive
    # (web/search_archive.py) and --web-replay's archives, served instead of the provider.
    cache_dir: str | None = None
    site_index: str | None = None
    web_record: str | None = None
    web_replay: tuple[str, ...] = ()

    @property
    def offered(self) -> bool:
        return self.provider != "none"

    @property
    def paid(self) -> bool:
        """Whether its searches cost money: a keyed provider the run asks (not a --web-replay of one)."""
        return self.provider in KEYED and self.api_key_env is not None

    def public(self) -> dict:
        """What defines results (run.json's fingerprint): no key, no run-local paths."""
        return self.model_dump(mode="json", exclude={"cache_dir", "site_index", "timeout", "max_retries", "backoff",
                                                     "cache", "api_key_env", "automatic", "web_record", "web_replay",
                                                     "price_per_search"})

    def for_run(self, run_dir: Path, site_index: Path | None, *, web_record: Path | None = None,
                web_replay: tuple[Path, ...] = ()) -> SearchSettings:
        return self.model_copy(update={"cache_dir": str(run_dir / "search-cache") if self.cache else None,
                                       "site_index": str(site_index) if site_index is not None else None,
                                       "web_record": str(web_record) if web_record is not None else None,
                                       "web_replay": tuple(str(p) for p in web_replay)})


class SearchTable(BaseModel):
    """The TOML's `[search]`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Provider | None = None
    max_results: int = Field(5, ge=1, le=MAX_RESULTS)
    block: tuple[str, ...] = ()
    cache: bool = True
    tavily: ProviderTable = ProviderTable()
    serper: ProviderTable = ProviderTable()
    brave: ProviderTable = ProviderTable()
    searxng: ProviderTable = ProviderTable()


def resolve(flag: str | None, blocks: list[str] | None, no_cache: bool, table: object,
            website: bool) -> SearchSettings:
    """The run's SearchSettings; InputError naming --search or the TOML key when they cannot work."""
    if flag is not None and flag not in PROVIDERS:
        raise InputError(f"--search {flag}: unknown provider (known: {', '.join(PROVIDERS)})")
    try:
        toml = SearchTable.model_validate(table or {})
    except ValidationError as exc:
        raise InputError("[search] in --config: " + validation_problems(exc)) from None
    for given, where in [*((p, "[search] block") for p in toml.block), *((p, "--search-block") for p in blocks or ())]:
        if problem := pattern_problem(given):
            raise InputError(f"{where} {given!r}: {problem} (e.g. example.com/answers)")
    provider = flag or toml.provider or ("site" if website else "none")
    where = f"--search {provider}" if flag else f"[search] provider = {provider!r}"
    if provider == "site" and not website:
        raise InputError(f"{where} searches the run's offline site: it needs --website DIR")
    section: ProviderTable = getattr(toml, provider, ProviderTable())
    base_url = section.base_url or DEFAULT_URLS.get(provider)
    if provider == "searxng" and not base_url:
        raise InputError(f"{where} needs the instance's URL: [search.searxng] base_url = \"http://HOST:PORT\"")
    return SearchSettings(provider=provider, base_url=base_url,  # type: ignore[arg-type]
                          api_key_env=(section.api_key_env or DEFAULT_KEY_ENV.get(provider)) if provider in KEYED
                          else None, timeout=section.timeout, max_retries=section.max_retries,
                          price_per_search=section.price_per_search,
                          options=section.options, max_results=toml.max_results, block=block_list(blocks, toml.block),
                          cache=toml.cache and not no_cache, automatic=not (flag or toml.provider))


def check_key(search: SearchSettings) -> None:
    """Before any container: the key's variable is set (InputError naming it otherwise)."""
    if search.api_key_env and not os.environ.get(search.api_key_env):
        raise InputError(f"--search {search.provider}: the key variable {search.api_key_env} is not set "
                         f"(set it, or name another: [search.{search.provider}] api_key_env = \"VAR\")")
