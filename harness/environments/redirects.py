"""Redirects followed one hop at a time, so the leakage guard sees every URL of a chain.

An in-sandbox script that fetches a URL starts with `NO_FOLLOW` (Python source): its `urlopen` never
follows a redirect; a 3xx with a `Location` prints `{"redirect": <the absolute next URL>, "status": <code>}`
as the script's last line and exits 0. `follow(fetch_one, url, blocked)` runs the script for a URL, checks
each next URL with `blocked` (the guard's pattern or None) before it is requested (a blocked hop is
`{"error": blocked_message(...), "outcome": "blocked"}`), and stops after MAX_HOPS (an error, as a browser's
"too many redirects"). Its opener goes through the run's web proxy when there is one (proxied.py). Before,
the scripts let urllib follow the chain and only its last URL was checked: unblocked → blocked → unblocked
(a Hub `resolve/` link to a CDN) read the blocked hop's answer unchecked.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.environments.proxied import HANDLERS

MAX_HOPS = 10

NO_FOLLOW = HANDLERS + r"""
import json as _json, sys as _sys, urllib.parse as _parse, urllib.request as _request
class _Stay(_request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        print(_json.dumps({"redirect": _parse.urljoin(req.full_url, newurl), "status": code}))
        _sys.exit(0)
_request.install_opener(_request.build_opener(_Stay, *_web_handlers()))
"""


def blocked_message(url: str, pattern: str) -> str:
    return (f"{url} is blocked by the leakage guard (pattern {pattern!r}): it publishes the benchmark's "
            "questions and answers. Find the facts elsewhere.")


def follow(fetch_one: Callable[[str], dict], url: str, blocked: Callable[[str], str | None]) -> dict:
    """The reply of the first hop that is not a redirect (with "url": the URL it was fetched from), the
    refusal of the first blocked hop, or an error after MAX_HOPS redirects."""
    for _ in range(MAX_HOPS + 1):
        data = fetch_one(url)
        if "redirect" not in data:
            return {**data, "url": data.get("url", url)}
        url = str(data["redirect"])
        if (pattern := blocked(url)) is not None:
            return {"error": blocked_message(url, pattern), "outcome": "blocked"}
    return {"error": f"too many redirects: more than {MAX_HOPS}, the last to {url}"}
