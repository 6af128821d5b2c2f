"""The leakage guard: URLs where GAIA's questions and answers are published, kept from the agent.

A pattern is matched against a URL's `host/path?query`, lower-cased, with any `www.` and a trailing
dot of the host dropped, the host in its ASCII (IDNA) form, the path percent-decoded, its repeated
slashes collapsed and its dot segments removed as RFC 3986 does (`/x/../secret` is `/secret`), the query's
escapes of unreserved characters decoded (`gaia%2Dbenchmark` is `gaia-benchmark`); a pattern's host is
read in the same ASCII form, so `bücher.example` and
`xn--bcher-kva.example` block each other's URLs (a browser navigates the second for the first):

- with a `*`: a glob over the whole of it (`huggingface.co/datasets/*/gaia*`);
- with a `/`: the host, then a path prefix (`huggingface.co/datasets/gaia-benchmark` blocks the
  organisation's datasets, not `.../gaia-benchmark-other`: the prefix ends at a `/`, `?` or the end);
- else a domain, its subdomains included (`example.com` blocks `a.example.com`).

`DEFAULT_BLOCK` names the benchmark's Hugging Face dataset, Space and organisation (on huggingface.co,
hf.co and the hub's mirror hf-mirror.com, and their `/api/` paths), its rows through the hub's dataset
viewer API, and known copies on the hub. `--search-block PATTERN` adds patterns; `--search-block none`
drops the defaults; a pattern with nothing to match (empty, a bare scheme, no host: `pattern_problem`) is
refused at load.
The guard is applied to every search provider's results (websearch/__init__.py), to the
browser's navigations (environments/web.py), to fetch_url's and download_file's every redirect hop
(environments/redirects.py) and to the site search's crawl (site.py, which runs this module's source in its
sandbox: keep it stdlib only); each blocked URL is an `env` trace event (env "guard", outcome "blocked"),
counted in the row's and the report's env_outcomes.
"""

from __future__ import annotations

import encodings.idna
import fnmatch
import re
import urllib.parse

HUB_HOSTS = ("huggingface.co", "hf.co", "hf-mirror.com")
DEFAULT_BLOCK: tuple[str, ...] = (
    *(f"{host}/{api}{kind}gaia-benchmark" for host in HUB_HOSTS for api in ("", "api/")
      for kind in ("datasets/", "spaces/", "models/", "")),
    "datasets-server.huggingface.co/*gaia-benchmark*",  # the dataset viewer's rows API
    *(f"{host}/{api}datasets/*/gaia*" for host in HUB_HOSTS for api in ("", "api/")),  # copies (e.g. evatan/GAIA)
    "*.hf.space/*gaia*", "gaia-benchmark-leaderboard.hf.space",  # the leaderboard Space served directly
)


DOTS = re.compile("[.\u3002\uff0e\uff61]")  # the dots IDNA reads as label separators


def _ascii(host: str) -> str:
    """A host in its ASCII form: each non-ASCII label as its `xn--` IDNA label (a label IDNA refuses, or
    one with a glob's `*`, stays as it is)."""
    labels = []
    for label in DOTS.split(host):
        if not label.isascii() and "*" not in label:
            try:
                label = encodings.idna.ToASCII(label).decode()
            except UnicodeError:
                pass
        labels.append(label)
    return ".".join(labels)


UNRESERVED_ESCAPE = re.compile(r"%(2[dDeE]|5[fF]|7[eE]|[46][1-9a-fA-F]|[57][0-9aA]|3[0-9])")


def _no_dots(path: str) -> str:
    """A path without its `.` and `..` segments (RFC 3986, 5.2.4); `..` above the root stays at the root."""
    kept: list[str] = []
    segments = path.split("/")[1:]
    for segment in segments:
        if segment == "..":
            kept = kept[:-1]
        elif segment != ".":
            kept.append(segment)
    tail = "/" if segments and segments[-1] in (".", "..") else ""
    return "/" + "/".join(kept) + tail


def _key(url: str) -> str:
    """`host/path?query` of a URL (a bare `host/path` is read as http), its path read as a server reads it:
    percent-escapes decoded (`gaia%2Dbenchmark` is `gaia-benchmark`), repeated slashes collapsed, dot
    segments removed; in the query, escapes of unreserved characters decoded."""
    parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    host = _ascii(parts.hostname or "").rstrip(".").removeprefix("www.")
    path = _no_dots(re.sub(r"/{2,}", "/", "/" + urllib.parse.unquote(parts.path).lstrip("/")))
    decoded = UNRESERVED_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), parts.query)
    query = f"?{decoded}" if parts.query else ""
    return f"{host}{path}{query}".lower()


def _bare(pattern: str) -> str:
    """A pattern as it is matched: lower-cased, without a scheme or `www.`, its host in ASCII form."""
    bare = pattern.lower().strip().removeprefix("https://").removeprefix("http://")
    host, slash, rest = bare.partition("/")
    return _ascii(host).removeprefix("www.") + slash + rest  # IDNA's labels are lower-case too


def pattern_problem(pattern: str) -> str | None:
    """Why a given pattern can match nothing (no host, or only a scheme), or None."""
    bare = _bare(pattern)
    if not bare or bare.startswith("/"):
        return "a block pattern with nothing to match: give a domain, a host/path prefix or a glob"
    return None


def _matches(pattern: str, key: str) -> bool:
    pattern = _bare(pattern)
    if "*" in pattern:
        return fnmatch.fnmatchcase(key, pattern)
    host, _, rest = key.partition("/")
    want_host, slash, want_path = pattern.partition("/")
    if not slash:
        return host == want_host or host.endswith("." + want_host)
    if host != want_host:
        return False
    path = rest.rstrip("/")
    want = want_path.rstrip("/")
    return path == want or path.startswith(want + "/") or path.startswith(want + "?") or not want


class Guard:
    """The run's block list; `blocks(url)` is the first pattern a URL matches, or None."""

    def __init__(self, patterns: tuple[str, ...]):
        self.patterns = tuple(p for p in patterns if p.strip())

    def blocks(self, url: str) -> str | None:
        key = _key(url)
        return next((p for p in self.patterns if _matches(p, key)), None)


def block_list(flags: list[str] | tuple[str, ...] | None, toml: list[str] | tuple[str, ...] = ()) -> tuple[str, ...]:
    """The defaults, then the TOML's `[search] block`, then `--search-block`s; a `none` among the
    flags drops the defaults (and itself)."""
    given = [*toml, *(flags or ())]
    base = () if "none" in given else DEFAULT_BLOCK
    return tuple(dict.fromkeys([*base, *(p for p in given if p != "none")]))
