"""Network policy per sandbox: none (default), internet, or internal:NAME.

On a local Linux engine a "none" sandbox has no network at all and its service answers on a
Unix socket (sockets.py); this module serves every other case. Docker publishes no ports on
`internal` networks, and the harness must reach each sandbox's service through a published
port, so there "none" is a harness-owned bridge network, `harness-none`, on a bridge device
of that same fixed name, with:

- IP masquerading off (nothing is NATed to the world) and inter-container traffic
  off (sandboxes cannot reach each other);
- firewall rules of our own for that bridge, applied once per process (preflight, or
  the first sandbox) when the harness can (root, `iptables`, a local engine whose
  bridges live on this host): packets from the bridge to the host (INPUT) and through
  it to anywhere else (DOCKER-USER, else FORWARD) are rejected unless they belong to a
  connection made from outside (the published port's replies keep flowing). Without
  them a sandbox reaches host services listening on all addresses via the gateway, and
  its packets leave the bridge un-NATed. When the rules cannot be applied the harness
  says so in one warning (logged, and printed by `harness run`). The rules only ever
  match our own bridge; the engine's bridges, networks and rules are never touched;
- no names of other sandboxes: on a user-defined network the engine's embedded DNS
  (127.0.0.11, reachable by any process in the container) answers every container
  *name* on the network. Sandboxes are therefore created without a Docker name (an
  anonymous endpoint: dockerd 20.10 registers no name for it); the harness's name is
  the label `harness.name`. What still resolves is each container's 12-hex-digit short
  id (48 random bits, an alias the engine always adds), which no sandbox can learn of
  another, and which leads to an address that inter-container rules block anyway.
  Names of the outside world do not resolve either (the engine forwards those queries
  from the sandbox's own network namespace, and nothing leaves the bridge): no DNS
  channel out.

The published port is bound to 127.0.0.1, so the sandbox cannot reach it back through
the gateway either. "internal:NAME" adds the existing internal network NAME (e.g. an
offline website for browsing tasks) to a "none" sandbox.

An internal network forwards nothing (the engine's own rules), but its bridge's address
is the host's, so a sandbox on it reaches every host service listening on all addresses
through the gateway. Every network the harness puts sandboxes on is therefore sealed or
warned about, once, naming what stays reachable:

- `--website`'s network gets a bridge of our own name (SITE_BRIDGE_PREFIX + 6 random hex
  digits) and the INPUT jump into our chain for it (`seal_site`), added after the network
  is made and deleted once its bridge is gone (`unseal_gone_sites`, by the website itself
  or by the cleanup that removes a killed run's network). Only jumps for bridges of that
  prefix that no longer exist are ever deleted: never `harness-none`'s (shared by every
  run, sealed for good), never any for docker0 or another bridge;
- an internal:NAME network the harness did not make is never touched: `check_policy`
  warns that it is not sealed, with its gateway (and, when it is not internal, that its
  routes lead on);
- "internet" puts sandboxes on the engine's default bridge, which reaches everything by
  design: no rules, no warning.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import threading

from filelock import FileLock, Timeout

from harness.errors import EngineNotFound, InfraError, InputError
from harness.sandbox.docker import engine
from harness.settings import state_dir

log = logging.getLogger(__name__)

ISOLATED = "harness-none"  # replaces the older `harness-isolated` (no fixed bridge name, no firewall)
ISOLATED_BRIDGE = "harness-none"  # the bridge device (<= 15 characters)
ISOLATED_OPTIONS = {
    "com.docker.network.bridge.name": ISOLATED_BRIDGE,
    "com.docker.network.bridge.enable_ip_masquerade": "false",
    "com.docker.network.bridge.enable_icc": "false",
}
CHAIN = "HARNESS-ISOLATED"  # our own iptables chain; reached only by jumps that match our bridge
_ready: set[str] = set()
_lock = threading.Lock()
_firewall: dict[str, str | None] = {}  # "problem": None when applied, else why not (once per process); "untold"


def ensure_isolated(log_fn=None) -> str:
    """The isolated network, created on first use, with its firewall rules (once per process).
    When the rules cannot be applied, one warning goes to the log, and to the first `log_fn` given
    (a sandbox may have made the network before the run's `prepare` gave one)."""
    with _lock:
        if ISOLATED in _ready:
            if log_fn is not None and (untold := _firewall.pop("untold", None)):
                log_fn(untold)
            return ISOLATED
        api = engine.client().api
        with FileLock(str(state_dir() / "networks.lock"), timeout=60):
            rows = [n for n in engine.call("network list", lambda: api.networks(names=[ISOLATED]))
                    if n["Name"] == ISOLATED]
            if not rows:
                engine.call("network create", lambda: api.create_network(
                    ISOLATED, driver="bridge", options=ISOLATED_OPTIONS, check_duplicate=True,
                    labels={"harness.managed": "1"}))
            else:
                inspected = engine.call("network inspect", lambda: api.inspect_network(rows[0]["Id"]))
                options = inspected.get("Options") or {}
                wrong = {k: v for k, v in ISOLATED_OPTIONS.items() if options.get(k) != v}
                if wrong:
                    raise InfraError(f"the Docker network {ISOLATED} exists without the options the harness "
                                     f"gives it ({wrong}); remove it (docker network rm {ISOLATED})")
            problem = apply_firewall()
        _firewall["problem"] = problem
        if problem:
            message = (f"warning: network 'none' is not sealed: no firewall rules for bridge {ISOLATED_BRIDGE} "
                       f"({problem}); sandboxes can reach host services listening on all addresses via the "
                       f"gateway, and their packets to other addresses leave the bridge un-NATed")
            log.warning(message)
            if log_fn is not None:
                log_fn(message)
            else:
                _firewall["untold"] = message
        _ready.add(ISOLATED)
        return ISOLATED


# ------------------------------------------------------------------ firewall
def _iptables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["iptables", "-w", "10", *args], capture_output=True, text=True, timeout=60)


def _why_not(bridge: str = ISOLATED_BRIDGE, witnesses: tuple[str, ...] = ()) -> str | None:
    """Why our rules cannot be applied on this machine, or None. The engine's bridges are on this host when
    `bridge` is, or one of `witnesses` (other bridges of the engine's, for a bridge that comes and goes)."""
    if not engine.engine_is_local():
        return "the engine is remote: its host's firewall is not this machine's"
    if os.geteuid() != 0:
        return "not running as root"
    if shutil.which("iptables") is None or shutil.which("iptables-restore") is None:
        return "no iptables or iptables-restore command"
    if not any(os.path.exists(f"/sys/class/net/{device}") for device in (bridge, *witnesses)):
        return "the engine's bridges are not on this host (a VM or another network namespace)"
    return None


# Our chain: replies to connections made from outside (the published port) go on, anything
# the sandbox starts is refused at once (an ICMP error, not a silent drop: agent code fails
# fast instead of waiting for a timeout).
_CHAIN_RULES = [
    ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"],
    ["-j", "REJECT", "--reject-with", "icmp-admin-prohibited"],
]
_DROP = ["-j", "DROP"]  # where the kernel has no REJECT target
# Every harness process on this host checks and changes our rules under this one lock (only root does: _why_not),
# wherever its state directory is: two processes that found the chain incomplete at once used to flush it in turn
# and append their rules, leaving it empty for a moment (every sandbox on the bridge reached the host) or with its
# rules twice, which the next process found "incomplete" and flushed again.
FIREWALL_LOCK = "/run/harness-firewall.lock"


def _firewall_lock() -> FileLock:
    return FileLock(FIREWALL_LOCK, timeout=120)


def _chain_complete() -> bool:
    """Exactly our two rules (the last a REJECT, or a DROP where the kernel has no REJECT)."""
    rules = [line for line in _iptables("-S", CHAIN).stdout.splitlines() if line.startswith("-A ")]
    checked = lambda rule: _iptables("-C", CHAIN, *rule).returncode == 0  # noqa: E731
    return len(rules) == 2 and checked(_CHAIN_RULES[0]) and (checked(_CHAIN_RULES[1]) or checked(_DROP))


def _restore_chain(last: list[str]) -> subprocess.CompletedProcess:
    """Our chain made (or replaced) whole in one transaction: `iptables-restore --noflush` leaves every other chain
    as it is and replaces the one it declares, so nobody ever sees it empty or half-made."""
    rules = "".join(f"-A {CHAIN} {' '.join(rule)}\n" for rule in (_CHAIN_RULES[0], last))
    return subprocess.run(["iptables-restore", "-w", "10", "--noflush"], capture_output=True, text=True, timeout=60,
                          input=f"*filter\n:{CHAIN} - [0:0]\n{rules}COMMIT\n")


def _ensure_chain() -> None:
    """Our chain, exactly its rules; call under _firewall_lock."""
    if _iptables("-n", "-L", CHAIN).returncode == 0 and _chain_complete():
        return
    done = _restore_chain(_CHAIN_RULES[1])
    if done.returncode != 0:  # no REJECT target: drop instead
        done = _restore_chain(_DROP)
    if done.returncode != 0:
        raise InfraError(f"iptables-restore of chain {CHAIN}: {done.stderr.strip()}")


def _ensure_jump(chain: str, bridge: str = ISOLATED_BRIDGE) -> None:
    """The jump from `chain` into ours for `bridge`, once; call under _firewall_lock."""
    rule = ["-i", bridge, "-j", CHAIN]
    if _iptables("-C", chain, *rule).returncode != 0:
        done = _iptables("-I", chain, "1", *rule)
        if done.returncode != 0:
            raise InfraError(f"iptables -I {chain} 1 {' '.join(rule)}: {done.stderr.strip()}")


def apply_firewall(bridge: str = ISOLATED_BRIDGE, witnesses: tuple[str, ...] = ()) -> str | None:
    """Apply (idempotently: each rule checked before it is added) the rules for our bridge
    (`bridge`: another harness-owned bridge, e.g. the swarm provider's, with the `witnesses` that show the
    engine's bridges are on this host while it is absent: _why_not). Returns None when they are in place, else
    the reason they could not be."""
    problem = _why_not(bridge, witnesses)
    if problem:
        return problem
    try:
        with _firewall_lock():
            _ensure_chain()
            _ensure_jump("INPUT", bridge)  # the host itself, via the gateway address or any other
            forward = "DOCKER-USER" if _iptables("-n", "-L", "DOCKER-USER").returncode == 0 else "FORWARD"
            _ensure_jump(forward, bridge)  # through the host to anywhere (other bridges, the world)
    except (InfraError, OSError, subprocess.SubprocessError, Timeout) as exc:
        return f"iptables failed: {exc}"
    return None


SITE_BRIDGE_PREFIX = "harness-s"  # + 6 hex digits: 15 characters, the most a device name has


def site_bridge_options() -> dict:
    """Options for a new site network: a bridge device named by us, so its rules can name it."""
    return {"com.docker.network.bridge.name": f"{SITE_BRIDGE_PREFIX}{secrets.token_hex(3)}"}


def bridge_of(network: dict) -> str:
    """The bridge device of an inspected (or listed) network, when it carries our name option."""
    return (network.get("Options") or {}).get("com.docker.network.bridge.name", "")


def seal_site(bridge: str) -> str | None:
    """The INPUT jump into our chain for a site network's bridge (the engine's rules for an
    internal network already forward nothing; bridged traffic between the site and the
    sandboxes never meets INPUT). None when in place, else why it could not be."""
    problem = _why_not(bridge)
    if problem:
        return problem
    try:
        with _firewall_lock():
            _ensure_chain()
            _ensure_jump("INPUT", bridge)
    except (InfraError, OSError, subprocess.SubprocessError, Timeout) as exc:
        return f"iptables failed: {exc}"
    return None


def unseal_gone_sites() -> None:
    """Delete the jumps into our chain for site bridges that no longer exist on this host: call
    once a site network is gone. Best effort; only jumps of the form
    `-i harness-sXXXXXX -j HARNESS-ISOLATED` are ever deleted, and only when that device is gone."""
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        return
    try:
        with _firewall_lock():
            for chain in ("INPUT", "DOCKER-USER", "FORWARD"):
                for line in _iptables("-S", chain).stdout.splitlines():
                    parts = line.split()
                    if len(parts) != 6 or parts[:3] != ["-A", chain, "-i"] or parts[4:] != ["-j", CHAIN]:
                        continue
                    device = parts[3]
                    if device.startswith(SITE_BRIDGE_PREFIX) and not os.path.exists(f"/sys/class/net/{device}"):
                        _iptables("-D", chain, "-i", device, "-j", CHAIN)
    except (OSError, subprocess.SubprocessError, Timeout) as exc:
        log.warning("could not delete the firewall rules of removed site networks: %s", exc)


def firewall_problem() -> str | None:
    """None when this process applied the rules; the reason otherwise (after ensure_isolated)."""
    return _firewall.get("problem")


# ------------------------------------------------------------------ policies
def check_policy(policy: str, log_fn=None) -> None:
    """Preflight: an internal:NAME network must already exist (the isolated network every other policy
    but internet uses is made by the provider's `prepare`, once the run has instances to run)."""
    if policy.startswith("internal:"):
        name = policy.split(":", 1)[1]
        rows = engine.call("network list", lambda: engine.client().api.networks(names=[name]))
        found = [n for n in rows if n["Name"] == name]
        if not found:
            raise InputError(f"network policy {policy}: no Docker network named {name!r}")
        if not bridge_of(found[0]).startswith(SITE_BRIDGE_PREFIX):  # a site's network is sealed by its website
            message = unsealed_warning(policy, found[0])
            log.warning(message)
            if log_fn is not None:
                log_fn(message)


def unsealed_warning(policy: str, network: dict, problem: str | None = None) -> str:
    """One line saying what a sandbox on this network still reaches."""
    configs = (network.get("IPAM") or {}).get("Config") or [{}]
    gateway = configs[0].get("Gateway") or "its gateway"
    why = f"no firewall rules for bridge {bridge_of(network)} ({problem})" if problem else (
        "the harness adds firewall rules only to networks it creates")
    routed = ("" if network.get("Internal")
              else f", and whatever {network.get('Name')} routes to (not an internal network)")
    return (f"warning: network {policy} is not sealed: {why}; sandboxes on it can reach host services "
            f"listening on all addresses via {gateway}{routed}")


# The embedded DNS never answers a name it cannot forward (nothing leaves the bridge), so a
# lookup would wait out glibc's 2 x 5 s; names it knows (an internal site's alias) come at once.
ISOLATED_DNS_OPTIONS = ["timeout:1", "attempts:1"]


def extra_networks(policy: str) -> list[str]:
    return [policy.split(":", 1)[1]] if policy.startswith("internal:") else []


def connect(container_id: str, policy: str) -> None:
    for name in extra_networks(policy):
        try:
            # noqa B023 below: engine.call runs the lambda before the loop moves on
            engine.call("network connect",
                        lambda: engine.client().api.connect_container_to_network(container_id, name))  # noqa: B023
        except EngineNotFound as exc:
            raise InputError(f"network policy {policy}: no Docker network named {name!r}") from exc
