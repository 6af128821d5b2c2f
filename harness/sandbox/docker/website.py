"""An offline website for browsing tasks, in its own container on an internal network.

A site folder holds `serve.py` (any HTTP server listening on port 80 inside the
container, printing "ready" when it listens) and `site.toml` with `alias = "HOST"`,
the host name the dataset's questions use. `harness run --website DIR` starts it
on a fresh internal network (no route out, no published port) and gives every
sandbox of the run the policy `internal:<that network>`; both are removed at the end.
The network's bridge is sealed against the host for as long as it exists (networks.py:
`seal_site`, `unseal_gone_sites`), or a warning says why not.
"""

from __future__ import annotations

import io
import logging
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.errors import InfraError
from harness.sandbox.docker import engine, naming, networks, storage
from harness.sandbox.site import site_info

log = logging.getLogger(__name__)

# The site server is a small Python script: it listens well within this.
READY_TIMEOUT_S = 30.0
# network -> {alias: the site's address on it}, while the site runs: sandboxes get the alias in
# their /etc/hosts (provider.py _network_options), so a page load needs no DNS answer, which a loaded
# engine's embedded DNS gave too late for the sandboxes' 1 s lookup timeout (ERR_NAME_NOT_RESOLVED).
_HOSTS: dict[str, dict[str, str]] = {}


def hosts_on(network: str) -> dict[str, str]:
    return dict(_HOSTS.get(network, {}))


def _archive(site_dir: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(site_dir, arcname="site")
    return buf.getvalue()


@contextmanager
def website(site_dir: Path, image: str, run_id: str) -> Iterator[str]:
    """Serve the site for one run; yields the network policy (internal:NETWORK) for its sandboxes."""
    alias, _ = site_info(site_dir)
    api = engine.client().api
    labels = naming.labels(run_id, "website", 1)
    network = f"harness-site-{naming.slug(run_id, 40)}"
    options = networks.site_bridge_options()
    bridge = networks.bridge_of({"Options": options})
    engine.call("network create", lambda: api.create_network(network, driver="bridge", internal=True, options=options,
                                                              labels=labels, check_duplicate=True))
    container_id = None
    try:
        if problem := networks.seal_site(bridge):  # the host, through the gateway (networks.py)
            log.warning(networks.unsealed_warning(f"internal:{network}", engine.call(
                "network inspect", lambda: api.inspect_network(network)), problem))
        config = api.create_networking_config({network: api.create_endpoint_config(aliases=[alias])})
        host_config = api.create_host_config(network_mode=network, mem_limit="512m", pids_limit=256,
                                             cap_drop=["ALL"], cap_add=["NET_BIND_SERVICE"],
                                             security_opt=["no-new-privileges"],
                                             log_config=storage.LOG_CONFIG)  # sandboxes' requests are logged
        created = engine.call("create", lambda: api.create_container(
            image, entrypoint=["python3", "/site/serve.py"], command=[], name=f"{network}-web", labels=labels,
            user="root",
            host_config=host_config, networking_config=config, working_dir="/site"), retries=0)
        container_id = created["Id"]
        archive = _archive(Path(site_dir))
        engine.call("copy", lambda: api.put_archive(container_id, "/", archive))
        engine.call("start", lambda: api.start(container_id), retries=0)
        deadline = time.monotonic() + READY_TIMEOUT_S
        logs = lambda: engine.call("logs", lambda: api.logs(container_id))  # noqa: E731
        while b"ready" not in logs():
            if time.monotonic() > deadline or not engine.container_state(container_id).get("Running"):
                raise InfraError(f"website {site_dir} did not start: {logs()[-2000:]!r}")
            time.sleep(0.05)
        attrs = engine.call("inspect", lambda: api.inspect_container(container_id))
        address = attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
        if address:
            _HOSTS[network] = {alias: address}
        yield f"internal:{network}"
    finally:
        _HOSTS.pop(network, None)
        if container_id:
            engine.remove_container(container_id)
        engine.remove_network(network)
        networks.unseal_gone_sites()  # only once the network is gone (else the cleanup that removes it does)
