"""What a --web-record run leaves in its folder's web/: the proxy's WARC files and, for a `site` search
of a --website, the search index it crawled (both read back by a --web-replay run of that folder)."""

from __future__ import annotations

from pathlib import Path

SITE_INDEX = "search-site-index"  # the `site` provider's index in a run folder (web/ when recorded)


def web_archives(run_dir: Path) -> list[Path]:
    """The WARC files a --web-record run left in its folder."""
    return sorted((Path(run_dir) / "web").glob("*.warc.gz"))


def recorded_site_index(run_dir: Path) -> Path | None:
    """The `site` search index a --web-record run of a --website left in its web/ folder, if any."""
    index = Path(run_dir) / "web" / SITE_INDEX
    return index if index.is_dir() else None
