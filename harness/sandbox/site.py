"""An offline website for browsing tasks: a folder any provider can serve.

A site folder holds `serve.py` (any HTTP server listening on port 80, printing "ready"
when it listens) and `site.toml` with `alias = "HOST"`, the host name the dataset's
questions use. `harness run --website DIR` has the provider serve it on a network of
the run's own that its sandboxes join (harness/sandbox/docker/website.py for Docker).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from harness.errors import InputError
from harness.fsutil import tree_hash


def site_info(site_dir: Path) -> tuple[str, str]:
    """(alias, content hash); InputError when the folder is not a site."""
    site_dir = Path(site_dir)
    if not (site_dir / "serve.py").is_file() or not (site_dir / "site.toml").is_file():
        raise InputError(f"--website {site_dir}: needs serve.py and site.toml")
    try:
        alias = tomllib.loads((site_dir / "site.toml").read_text())["alias"]
    except (tomllib.TOMLDecodeError, KeyError) as exc:
        raise InputError(f"--website {site_dir}/site.toml: needs alias = \"HOST\" ({exc})") from None
    if not isinstance(alias, str) or not alias:
        raise InputError(f"--website {site_dir}/site.toml: alias must be a host name string, not {alias!r}")
    return alias, tree_hash(site_dir)
