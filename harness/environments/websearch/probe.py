"""Preflight of the run's search provider: one real search before any container, as models/probe.py
does for the models, so a wrong key, URL or option ends the run with exit 2 instead of every instance.

Asked: a hosted provider (tavily, serper, brave, searxng) that the run calls live, so not the offline
`site`, not `none`, and not a --web-replay run (which never calls the provider). One request for
PROBE_QUERY, one result, with the header `X-Harness-Preflight: 1` so a provider's logs (and the tests'
fake servers) can tell it from an agent's search. It is never retried, cached, or recorded in a
--web-record archive, and it takes at most PROBE_TIMEOUT s (the provider's own timeout when shorter).

The rules follow the model probe's. A provider that cannot work for any instance is an InputError
(exit 2) naming `--search PROVIDER` and its URL, in the provider's own words: no answer (refused,
unresolvable, no answer in time), the key refused or its quota used up, the probe's query refused (any
other 4xx: the options or the URL are wrong), or an answer that is not the provider's JSON. A busy or
failing server (429, 5xx) only gets a warning: it may recover, and instances that meet it retry.
"""

from __future__ import annotations

import os

from harness.environments.websearch.settings import SearchSettings
from harness.errors import InputError

PROBE_QUERY = "harness preflight"
PROBE_TIMEOUT = 20.0
HEADER = "X-Harness-Preflight"


def probe_search(settings: SearchSettings) -> str | None:
    """One search as the module docstring says: None when it is answered, a warning for a busy server,
    InputError when the provider cannot work."""
    if settings.provider in ("none", "site") or settings.web_replay or settings.base_url is None:
        return None
    import httpx  # a run that searches nothing does not import the HTTP client and the archive's modules

    from harness.environments.websearch import providers
    from harness.environments.websearch.env import SearchHTTP

    where = f"--search {settings.provider} ({settings.base_url})"
    key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
    request = providers.request(settings.provider, settings.base_url, PROBE_QUERY, 1, key, settings.options)
    request.headers[HEADER] = "1"
    http = SearchHTTP(min(settings.timeout, PROBE_TIMEOUT))
    try:
        response = http.send(request)
    except httpx.HTTPError as exc:
        raise InputError(f"{where}: the search preflight got no answer: {type(exc).__name__}: {exc}") from None
    finally:
        http.client.close()
    said = f"HTTP {response.status_code}: {providers.detail(response)}"
    if response.status_code != 200:
        kind = providers.refusal(settings.provider, response)
        if kind == "retry":
            return f"warning: {where} is busy or failing at the preflight ({said}); instances that meet it retry"
        if kind == "key" and settings.api_key_env:
            raise InputError(f"{where} refused the key from {settings.api_key_env}: {said}")
        if kind == "quota":
            raise InputError(f"{where}: the key's quota is used up: {said}")
        raise InputError(f"{where} refused the preflight's search (check its base_url and options): {said}")
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise InputError(f"{where}: the preflight's answer is not {settings.provider}'s JSON: "
                         f"{response.text[:200]!r}")
    return None
