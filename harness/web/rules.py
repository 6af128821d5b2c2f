"""The web archive's two rules, pure and stdlib only: the proxy image carries this file beside its
addon (harness/sandbox/docker/webproxy.py copies it into the build), the host uses it for search.

`request_key(method, url, body)`: what a replayed request must match of a recorded one. The method;
the URL's scheme, host (lower case), port (the scheme's default dropped) and path; the query string
as a sorted list of (name, value) pairs (order does not matter, repeats do), without the cache-busting
parameters of TIMESTAMP_PARAMS (`_`, `t`, `ts`, `timestamp`, `cb`, `cachebust`, `nocache`, `rnd`), whose
values are clocks; the fragment never (it is not sent); the body's SHA-256 for a method with one.
Headers and cookies never count: a recording made with one session's cookies replays to another.

`blocked(status, content_type, body)`: is a response a CAPTCHA or bot wall? The marker that matched,
or None. A page is a wall when it carries a marker of a well-known challenge (reCAPTCHA, hCaptcha,
Cloudflare's challenge platform, PerimeterX, DataDome, Akamai) at any status, or a generic refusal
phrase with a refusing status (401, 403, 429, 503). Only the first 64 KiB of an HTML or text body is read.
"""

from __future__ import annotations

import hashlib
import urllib.parse

TIMESTAMP_PARAMS = frozenset({"_", "t", "ts", "timestamp", "cb", "cachebust", "nocache", "rnd"})
DEFAULT_PORTS = {"http": 80, "https": 443}


def request_key(method: str, url: str, body: bytes = b"") -> str:
    parts = urllib.parse.urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    port = parts.port if parts.port not in (None, DEFAULT_PORTS.get(scheme)) else None
    query = sorted((name, value) for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
                   if name not in TIMESTAMP_PARAMS)
    where = f"{scheme}://{host}{f':{port}' if port else ''}{parts.path or '/'}"
    digest = hashlib.sha256(body).hexdigest() if body else ""
    return f"{method.upper()} {where} {urllib.parse.urlencode(query)} {digest}".rstrip()


# At any status: these are served only by challenge pages.
CHALLENGE_MARKERS = (
    "g-recaptcha", "recaptcha/api.js", "h-captcha", "hcaptcha.com/1/api.js", "challenges.cloudflare.com",
    "cf-challenge", "cf_chl_", "/cdn-cgi/challenge-platform/", "px-captcha", "captcha-delivery.com",
    "geo.captcha-delivery.com", "_incapsula_resource",
)
# With a refusing status only: ordinary pages may say these.
REFUSAL_MARKERS = (
    "captcha", "are you a robot", "are you a human", "unusual traffic", "just a moment...",
    "attention required!", "access denied", "verify you are human", "bot detection", "request blocked",
)
REFUSING = frozenset({401, 403, 429, 503})
READ = 64 * 1024


def blocked(status: int, content_type: str, body: bytes) -> str | None:
    if not any(kind in (content_type or "").lower() for kind in ("html", "text", "json")) and body[:1] != b"<":
        return None
    text = body[:READ].decode("utf-8", "replace").lower()
    for marker in CHALLENGE_MARKERS:
        if marker in text:
            return marker
    if status in REFUSING:
        for marker in REFUSAL_MARKERS:
            if marker in text:
                return marker
    return None
