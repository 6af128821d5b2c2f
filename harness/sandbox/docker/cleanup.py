"""Find and remove harness containers, and only harness containers.

Every container the harness creates carries the label harness.managed=1 and an
owner label (naming.owner_token: "host:pid:starttime" for a harness on a host,
"ctr:engine:container:pid:starttime" for one inside a Docker container, e.g. the
docker-compose service). A container is an orphan when naming.owner_alive says its
owner is certainly gone: a process on this host that no longer exists (or whose PID
now names another process), or a containerised harness whose container has exited
or no longer exists on the engine we drive. Containers of live owners, of other
hosts or engines, of owners this process cannot judge, and containers without our
label are never touched unless asked for by run id (--run-id) or --all; even
--all only ever selects containers with our label.

A recording web proxy's archive (--web-record) is on a volume of its own until it is kept (webarchive.py):
reap keeps the archives of the volumes it chooses (as it chooses containers) in their runs' web/ folders
before it removes any container, and removes those volumes.

Reaps of one engine from this machine take turns (`reap_lock`): harness runs started together, and a
`harness cleanup` beside them, never judge and remove the same orphans at once, so each removed
container is reported by the one reaper that removed it."""

from __future__ import annotations

import functools

from filelock import FileLock, Timeout

from harness.errors import EngineInUse
from harness.sandbox.contract import Leftover as Found
from harness.sandbox.docker import engine, naming, networks, sockets, webarchive

PASSES = 3  # look-ups for containers a just-killed harness's in-flight requests made (reap)
REAP_LOCK_TIMEOUT_S = 300  # a reaper waits this long for another one on the same engine, then reaps anyway


def reap_lock() -> FileLock:
    """The machine-wide turn of reapers of this engine: one object per file in a process (re-entrant on one
    thread), so a caller holding it may call reap itself."""
    return FileLock(str(engine.lock_path("reap")), timeout=REAP_LOCK_TIMEOUT_S, is_singleton=True)


def find(run_id: str | None = None) -> list[Found]:
    filters = [f"{naming.LABEL_MANAGED}=1"]
    if run_id:
        filters.append(f"{naming.LABEL_RUN}={run_id}")
    rows = engine.call("list", lambda: engine.client().api.containers(all=True, filters={"label": filters}))
    return [
        Found(r["Id"], r["Labels"].get(naming.LABEL_NAME) or (r.get("Names") or ["?"])[0].lstrip("/"),
              r["Labels"].get(naming.LABEL_RUN, ""),
              r["Labels"].get(naming.LABEL_OWNER, ""), r.get("State", ""))
        for r in rows
    ]


def select(found: list[Found], *, run_id: str | None = None, everything: bool = False) -> list[Found]:
    if everything or run_id:
        return found
    alive = functools.cache(naming.owner_alive)  # one judgement per owner and pass (it may ask the engine)
    return [f for f in found if alive(f.owner) is False]


def find_networks(run_id: str | None = None) -> list[Found]:
    """Per-run harness networks (websites); the shared isolated network carries no owner."""
    filters = [f"{naming.LABEL_MANAGED}=1", naming.LABEL_OWNER] + ([f"{naming.LABEL_RUN}={run_id}"] if run_id else [])
    rows = engine.call("list networks", lambda: engine.client().api.networks(filters={"label": filters}))
    return [Found(r["Id"], r["Name"], r["Labels"].get(naming.LABEL_RUN, ""), r["Labels"].get(naming.LABEL_OWNER, ""),
                  "network") for r in rows]


def reap(*, run_id: str | None = None, everything: bool = False, dry_run: bool = False) -> list[Found]:
    """Remove orphans (default), all containers of run_id, or every harness container;
    then the per-run networks chosen the same way (containers first: a network in use cannot go).

    A harness killed a moment ago may still have engine requests in flight (a create or start
    the engine finishes without it), so containers are looked for again until a pass finds no
    new one; a chosen network that still has endpoints after that is left for a later cleanup."""
    lock = reap_lock()
    try:
        lock.acquire()
        held = True
    except Timeout:  # a reaper stuck for minutes must not stop this one: a container removed twice is harmless
        held = False
    try:
        return _reap(run_id=run_id, everything=everything, dry_run=dry_run)
    finally:
        if held:
            lock.release()


def _reap(*, run_id: str | None, everything: bool, dry_run: bool) -> list[Found]:
    doomed = select(find(run_id), run_id=run_id, everything=everything)
    archives = select(webarchive.find(run_id), run_id=run_id, everything=everything)
    if dry_run:
        return doomed + archives + select(find_networks(run_id), run_id=run_id, everything=everything)
    # Before the containers go: keeping an archive stops its proxy gracefully (its last record whole).
    kept = [item for item in archives if webarchive.rescue(item, forced=everything)]
    removed: dict[str, Found] = {}
    for _ in range(PASSES):
        fresh = [item for item in doomed if item.id not in removed]
        if not fresh:
            break
        for item in fresh:
            engine.remove_container(item.id)
            sockets.remove(item.name)  # its socket transport's directory, if it had one
            removed[item.id] = item
        doomed = select(find(run_id), run_id=run_id, everything=everything)
    if not run_id:  # the socket directories killed harnesses left with no container (a start or removal cut short)
        sockets.sweep({item.name for item in find()})
    nets = []
    for item in select(find_networks(run_id), run_id=run_id, everything=everything):
        try:
            engine.remove_network(item.id)
        except EngineInUse:
            continue  # a container the passes above did not choose still uses it
        nets.append(item)
    if nets:
        networks.unseal_gone_sites()  # a site network's firewall jump goes with it
    return list(removed.values()) + kept + nets

