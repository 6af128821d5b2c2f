"""An offline website for browsing tasks, in its own container on an internal network.

A site folder holds `serve.py` (any HTTP server listening on port 80 inside the
container, printing "ready" when it listens) and `site.toml` with `alias = "HOST"`,
the host name the dataset's questions use. `harness run --website DIR` starts it
on a fresh internal network (no route out, no published port) and gives every
sandbox of the run the policy `internal:<that network>`; both are removed at the end.
"""

from __future__ import annotations

import io
import tarfile
import time
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from harness.errors import InfraError, InputError
from harness.images.build import tree_hash
from harness.sandbox.docker import engine, naming

# The site server is a small Python script: it listens well within this.
READY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Website:
    network: str
    alias: str
    container_id: str


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


def _archive(site_dir: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(site_dir, arcname="site")
    return buf.getvalue()


@contextmanager
def website(site_dir: Path, image: str, run_id: str) -> Iterator[Website]:
    alias, _ = site_info(site_dir)
    api = engine.client().api
    labels = naming.labels(run_id, "website", 1)
    network = f"harness-site-{naming.slug(run_id, 40)}"
    engine.call("network create", lambda: api.create_network(network, driver="bridge", internal=True,
                                                              labels=labels, check_duplicate=True))
    container_id = None
    try:
        config = api.create_networking_config({network: api.create_endpoint_config(aliases=[alias])})
        host_config = api.create_host_config(network_mode=network, mem_limit="512m", pids_limit=256,
                                             cap_drop=["ALL"], cap_add=["NET_BIND_SERVICE"],
                                             security_opt=["no-new-privileges"])
        created = engine.call("create", lambda: api.create_container(
            image, entrypoint=["python3", "/site/serve.py"], command=[], name=f"{network}-web", labels=labels, user="root",
            host_config=host_config, networking_config=config, working_dir="/site"))
        container_id = created["Id"]
        api.put_archive(container_id, "/", _archive(Path(site_dir)))
        engine.call("start", lambda: api.start(container_id))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while b"ready" not in api.logs(container_id):
            if time.monotonic() > deadline or not engine.container_state(container_id).get("Running"):
                raise InfraError(f"website {site_dir} did not start: {api.logs(container_id)[-2000:]!r}")
            time.sleep(0.05)
        yield Website(network=network, alias=alias, container_id=container_id)
    finally:
        if container_id:
            engine.remove_container(container_id)
        engine.remove_network(network)
