"""Network policy on swarm: what a service can join, and what the harness enforces.

Services join swarm-scoped networks only, and the harness reaches sandboxd through a port
published in host mode, which the engine maps only for a bridge endpoint (a task on an
`internal` overlay network alone gets no published port: measured on dockerd 20.10). So:

- "none" (default): `harness-swarm-none`, a swarm-scoped *bridge* network made from a
  config-only network `harness-swarm-none-config` that must exist on every node (preflight
  makes it on the manager; `ensure_node_config(client)` makes it on a worker, like the image
  this is per-node setup; a node without it rejects the task and preflight names it). Its
  options are those of the docker provider's `harness-none`: no IP masquerading (nothing
  NATed to the world), no inter-container traffic, on a bridge device `harness-swnone`. Service
  names do not resolve on it (measured: `getent hosts` of another sandbox's service fails).
  What swarm cannot do here that the docker provider does: bind the published port to
  127.0.0.1 (host-mode ports listen on all of the node's addresses: every request still
  needs the sandbox's token), and the docker provider's firewall rules against the host
  (INPUT) are applied only for a local manager's own bridge (`firewall_problem()` says why
  not otherwise, and preflight prints it as one warning).
- "internet": the swarm's predefined `bridge` network (the node's docker0, NATed).
- "internal:NAME": "none" plus NAME, which must be a swarm-scoped network (e.g. an internal
  attachable overlay). A local network (what the docker provider's `--website` makes) cannot
  be joined by a service: preflight refuses it as an InputError before any service starts.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime

from harness.errors import EngineConflict, EngineNotFound, InfraError, InputError
from harness.sandbox.docker import engine

ISOLATED = "harness-swarm-none"
CONFIG = "harness-swarm-none-config"
BRIDGE = "harness-swnone"  # the bridge device on each node (<= 15 characters)
OPTIONS = {
    "com.docker.network.bridge.name": BRIDGE,
    "com.docker.network.bridge.enable_ip_masquerade": "false",
    "com.docker.network.bridge.enable_icc": "false",
}
INTERNET = "bridge"  # swarm's predefined network of that name
# The embedded DNS cannot forward a name (nothing leaves the bridge): fail a lookup fast.
DNS_OPTIONS = ["timeout:1", "attempts:1"]
STALE_WAIT_S = 60  # a left swarm's copy of the network goes within ~2 s at load 1 (measured)
_lock = threading.Lock()
_ready = False


def _find(api, name: str) -> dict | None:
    rows = engine.call("network list", lambda: api.networks(names=[name]))
    return next((row for row in rows if row["Name"] == name), None)


def _create(api, body: dict) -> None:
    # The SDK's create_network has no ConfigOnly/ConfigFrom: the documented endpoint directly.
    def post():
        return api._result(api._post_json(api._url("/networks/create"), data=body), True)

    engine.call("network create", post, retries=0)


def ensure_node_config(api) -> None:
    """Create the config-only network on the engine of `api` (a docker APIClient of one node),
    unless present with our options (InfraError when present with others)."""
    found = _find(api, CONFIG)
    if found is None:
        try:
            _create(api, {"Name": CONFIG, "ConfigOnly": True, "Options": OPTIONS, "CheckDuplicate": True,
                          "Labels": {"harness.managed": "1"}})
        except EngineConflict:
            pass  # another process made it a moment ago
        return
    options = engine.call("network inspect", lambda: api.inspect_network(found["Id"])).get("Options") or {}
    wrong = {k: v for k, v in OPTIONS.items() if options.get(k) != v}
    if wrong:
        raise InfraError(f"the network {CONFIG} exists without the harness's options ({wrong}); remove it "
                         f"(docker network rm {CONFIG}) on that node")


def ensure_isolated() -> str:
    """The swarm-scoped isolated network (and the manager's config-only one), made once."""
    global _ready
    with _lock:
        if _ready:
            return ISOLATED
        api = engine.client().api
        ensure_node_config(api)
        found = _find(api, ISOLATED)
        if found is not None and _left_behind(api, found):
            found = _wait_gone(api)
        if found is None:
            try:
                # A network made from a config network takes no labels of its own.
                _create(api, {"Name": ISOLATED, "Driver": "bridge", "Scope": "swarm", "ConfigFrom": {"Network": CONFIG},
                              "CheckDuplicate": True})
            except EngineConflict:
                pass  # another process made it a moment ago
        elif found.get("Scope") != "swarm" or found.get("Driver") != "bridge":
            raise InfraError(f"the network {ISOLATED} exists but is not a swarm-scoped bridge network; remove it "
                             f"(docker network rm {ISOLATED})")
        _ready = True
        return ISOLATED


def _left_behind(api, found: dict) -> bool:
    """Whether the listed network is this engine's copy of the network of a swarm it left: made
    before the swarm it is in now. Such a copy stays listed for a few seconds after `docker swarm
    leave` (also after a new `swarm init`), and a service naming it is refused with "network
    harness-swarm-none not found" (seen in CI: one test module's swarm left, the next one's made)."""
    info = engine.call("info", api.info)
    cluster_made = ((info.get("Swarm") or {}).get("Cluster") or {}).get("CreatedAt")
    if not cluster_made or not found.get("Created"):
        return False
    return datetime.fromisoformat(found["Created"]) < datetime.fromisoformat(cluster_made)


def _wait_gone(api) -> dict | None:
    """Until the left swarm's copy is gone (the engine removes it itself; it cannot be removed by
    a request: "not found"), or InfraError after STALE_WAIT_S."""
    deadline = time.monotonic() + STALE_WAIT_S
    while (found := _find(api, ISOLATED)) is not None and _left_behind(api, found):
        if time.monotonic() > deadline:
            raise InfraError(f"the network {ISOLATED} of a swarm this engine left is still listed after "
                             f"{STALE_WAIT_S}s; restart the engine or wait, then retry")
        time.sleep(0.2)
    return found


def check_policy(policy: str) -> None:
    """Preflight: every policy the swarm can give, or InputError naming what it cannot."""
    if policy == "internet":
        return
    ensure_isolated()
    if policy.startswith("internal:"):
        name = policy.split(":", 1)[1]
        found = _find(engine.client().api, name)
        if found is None:
            raise InputError(f"network policy {policy}: no Docker network named {name!r}")
        if found.get("Scope") != "swarm":
            raise InputError(f"network policy {policy}: {name!r} is a {found.get('Scope')}-scoped network; swarm "
                             f"services can join swarm-scoped networks only (e.g. docker network create -d overlay "
                             f"--internal --attachable {name})")


def service_networks(policy: str) -> list[str]:
    if policy == "internet":
        return [INTERNET]
    networks = [ISOLATED]
    if policy.startswith("internal:"):
        networks.append(policy.split(":", 1)[1])
    return networks


def dns_options(policy: str) -> list[str]:
    return [] if policy == "internet" else list(DNS_OPTIONS)


def remove_isolated(api) -> None:
    """Remove the swarm network and this engine's config-only one (tests; in use: kept)."""
    global _ready
    for name in (ISOLATED, CONFIG):
        try:
            engine.call("network remove", lambda: api.remove_network(name))  # noqa: B023 - called now
        except EngineNotFound:
            pass
    _ready = False


# The engine's own bridges, one of which a node of this host has. Our bridge itself is there only while a task on
# the network runs on the node, and for about 2 s after the last one (measured): the rules name the device, so they
# hold whenever it comes back, and are made whether or not it is there at the moment.
ENGINE_BRIDGES = ("docker0", "docker_gwbridge")


def apply_firewall() -> str | None:
    """The docker provider's rules for our bridge on this machine (a local manager's node), whether or not the
    bridge is there now. None when applied, else why not (workers' bridges are in their own hosts or
    namespaces)."""
    from harness.sandbox.docker import networks as docker_networks

    return docker_networks.apply_firewall(BRIDGE, ENGINE_BRIDGES)
