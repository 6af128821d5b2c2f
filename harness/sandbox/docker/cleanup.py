"""Find and remove harness containers, and only harness containers.

Every container the harness creates carries the label harness.managed=1 and an
owner label "host:pid:starttime". A container is an orphan when its owner is a
process on this host that no longer exists (or whose PID now names another
process). Containers of live owners, of other hosts, and containers without our
label are never touched unless asked for by run id (--run-id) or --all; even
--all only ever selects containers with our label.
"""

from __future__ import annotations

from harness.sandbox.contract import Leftover as Found
from harness.sandbox.docker import engine, naming


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
    return [f for f in found if naming.owner_alive(f.owner) is False]


def find_networks(run_id: str | None = None) -> list[Found]:
    """Per-run harness networks (websites); the shared isolated network carries no owner."""
    filters = [f"{naming.LABEL_MANAGED}=1", naming.LABEL_OWNER] + ([f"{naming.LABEL_RUN}={run_id}"] if run_id else [])
    rows = engine.call("list networks", lambda: engine.client().api.networks(filters={"label": filters}))
    return [Found(r["Id"], r["Name"], r["Labels"].get(naming.LABEL_RUN, ""), r["Labels"].get(naming.LABEL_OWNER, ""),
                  "network") for r in rows]


def reap(*, run_id: str | None = None, everything: bool = False, dry_run: bool = False) -> list[Found]:
    """Remove orphans (default), all containers of run_id, or every harness container;
    then the per-run networks chosen the same way (containers first: a network in use cannot go)."""
    doomed = select(find(run_id), run_id=run_id, everything=everything)
    nets = select(find_networks(run_id), run_id=run_id, everything=everything)
    if not dry_run:
        for item in doomed:
            engine.remove_container(item.id)
        for item in nets:
            engine.remove_network(item.id)
    return doomed + nets
