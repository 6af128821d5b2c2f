"""The tools' own HTTP requests in the sandbox through the run's web proxy (--web-record / --web-replay).

The browser reaches the proxy through its flags (HARNESS_BROWSER_FLAGS); the in-sandbox scripts that fetch
(fetch_url, download_file, the site search's crawl) reach it through HARNESS_WEB_PROXY (the proxy's
http:// address) and HARNESS_WEB_CA (the run CA's certificate, PEM: never its key), which the provider
sets for the sandboxes of the proxy's network (sandbox/docker/webproxy.py). So what they fetch is recorded
and replayed as the browser's pages are: with --web-replay the proxy answers from the archive and no host
needs resolving in the sandbox. A script starts with `HANDLERS` (Python source) and builds its opener with
`_web_handlers()`: the proxy for every URL (loopback too, as the browser's `<-loopback>`), the run CA
trusted for HTTPS; none without the variables (urllib's defaults). Only these scripts trust the run CA:
agent code's own TLS clients do not. `PROXIED` is `HANDLERS` plus an opener of those handlers alone,
installed (a script with no handler of its own).

The proxy marks each answer X-Harness-Web: hit | miss when replaying; `archive_note` traces it as the
browser's side does (env `web_archive`, action web_hit / web_miss).
"""

from __future__ import annotations

from harness.traces import EnvAction, Tracer

HANDLERS = r"""
import os as _os, ssl as _ssl, urllib.request as _urlreq
def _web_handlers():
    proxy = _os.environ.get("HARNESS_WEB_PROXY")
    if not proxy:
        return []
    context = _ssl.create_default_context(cadata=_os.environ.get("HARNESS_WEB_CA") or None)
    return [_urlreq.ProxyHandler({"http": proxy, "https": proxy}), _urlreq.HTTPSHandler(context=context)]
"""
PROXIED = HANDLERS + "_urlreq.install_opener(_urlreq.build_opener(*_web_handlers()))\n"
MARK = "X-Harness-Web"  # the replaying proxy's header (images/webproxy/warc_addon.py)


def archive_note(tracer: Tracer, mark: str | None, url: str, method: str = "GET") -> None:
    """A replayed hit or a `web_miss` the run's web proxy said it served for `url` (nothing without a mark)."""
    if mark:
        tracer.emit(EnvAction(env="web_archive", action=f"web_{mark}", outcome=mark,
                              args={"url": url, "method": method}))
