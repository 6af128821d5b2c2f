"""Where a recording web proxy's archive lives until it is kept: a named volume of its own.

The proxy (webproxy.py) appends each exchange to /data/web.warc.gz, and /data is a volume made for the run,
labelled with its run, its owner (as every harness container is: naming.py) and the file the archive is
kept in (naming.LABEL_WEB_ARCHIVE: RUN_DIR/web/RUN_ID.warc.gz). Removing the proxy's container (forced,
with its anonymous volumes: a Ctrl-C's removal of the run's containers, any harness's reaping of a killed
run's, `harness cleanup`) leaves the volume, so the archive survives every stop the rows survive.

`keep(volume, out)` stops the proxy still using the volume (mitmdump ends after the record it is writing)
and removes it, copies the archive into `out` atomically (a reader sees no file or the whole of it) and
removes the volume. The run does it when its services stop; after a kill -9 the next harness run (or
`harness cleanup`) does it when it reaps the orphans (cleanup.py: `rescue`), when the file's web/ folder
is on its machine. A volume whose archive cannot be kept is left for a later cleanup, never deleted unread,
unless `harness cleanup --all` asks for it.
"""

from __future__ import annotations

import logging
import tarfile
import tempfile
from pathlib import Path

from harness.errors import EngineNotFound
from harness.fsutil import slug, write_atomic
from harness.sandbox.contract import Leftover
from harness.sandbox.docker import engine, images, naming

log = logging.getLogger(__name__)

DATA = "/data"  # the proxy's archive folder (images/webproxy/warc_addon.py writes web.warc.gz there)
FILE = f"{DATA}/web.warc.gz"
STOP_TIMEOUT_S = 10  # mitmdump ends on SIGTERM in 1-3 s here; the engine kills it after this


def create(run_id: str, out: Path, image: str) -> str:
    """A fresh volume for the run's archive, to be kept in `out`; its name."""
    name = f"harness-webarchive-{slug(run_id, 40)}"
    labels = {**naming.labels(run_id, "webarchive", 1), naming.LABEL_WEB_ARCHIVE: str(out), images.LABEL: image}
    engine.call("volume create", lambda: engine.client().api.create_volume(name, labels=labels))
    return name


def binds(volume: str) -> dict:
    return {volume: {"bind": DATA, "mode": "rw"}}


def keep(volume: str, out: Path) -> bool:
    """The archive in `out`, the volume gone; True when the archive is in `out` (kept now, or before)."""
    api = engine.client().api
    try:
        labels = engine.call("volume inspect", lambda: api.inspect_volume(volume)).get("Labels") or {}
    except EngineNotFound:
        return out.is_file()  # kept already (by the reaper of a Ctrl-C)
    for user in engine.call("list", lambda: api.containers(all=True, filters={"volume": volume})):
        _stop(user["Id"])
        engine.remove_container(user["Id"])
    reader = engine.call("create", lambda: api.create_container(
        labels[images.LABEL], labels=naming.labels(labels.get(naming.LABEL_RUN, ""), "webarchive-reader", 1),
        host_config=api.create_host_config(network_mode="none", binds={volume: {"bind": DATA, "mode": "ro"}})),
        retries=0)["Id"]
    try:
        stream, _ = engine.call("get archive", lambda: api.get_archive(reader, FILE))
        with tempfile.TemporaryFile() as tar_file:
            for chunk in stream:
                tar_file.write(chunk)
            tar_file.seek(0)
            with tarfile.open(fileobj=tar_file) as tar:
                member = tar.extractfile(tar.getmembers()[0])
                assert member is not None
                out.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(out, member.read())
    finally:
        engine.remove_container(reader)
    discard(volume)
    return True


def _stop(container_id: str) -> None:
    """SIGTERM, and the engine's kill after STOP_TIMEOUT_S; gone already is fine."""
    try:
        engine.call("stop", lambda: engine.client().api.stop(container_id, timeout=STOP_TIMEOUT_S), retries=0)
    except EngineNotFound:
        pass


def discard(volume: str) -> None:
    try:
        engine.call("volume remove", lambda: engine.client().api.remove_volume(volume))
    except EngineNotFound:
        pass


def find(run_id: str | None = None) -> list[Leftover]:
    """The archive volumes not kept yet (of one run, or all), as leftovers (state "volume")."""
    filters = [f"{naming.LABEL_MANAGED}=1", naming.LABEL_WEB_ARCHIVE]
    if run_id:
        filters.append(f"{naming.LABEL_RUN}={run_id}")
    found = engine.call("list volumes", lambda: engine.client().api.volumes(filters={"label": filters}))
    return [Leftover(v["Name"], v["Name"], (v.get("Labels") or {}).get(naming.LABEL_RUN, ""),
                     (v.get("Labels") or {}).get(naming.LABEL_OWNER, ""), "volume")
            for v in (found or {}).get("Volumes") or []]


def rescue(volume: Leftover, *, forced: bool) -> bool:
    """The reaper's side (cleanup.py): keep a left volume's archive in the file its label names, when that is
    in a web/ folder on this machine; True when the volume is gone (kept, or `forced` to go unread)."""
    try:
        labels = engine.call("volume inspect", lambda: engine.client().api.inspect_volume(volume.id))["Labels"]
        out = Path(labels[naming.LABEL_WEB_ARCHIVE])
        if out.is_absolute() and out.name.endswith(".warc.gz") and out.parent.name == "web" and out.parent.is_dir():
            return keep(volume.id, out)
        log.warning("the web archive %s is kept for %s, not a run's web/ folder here: left for a later cleanup",
                    volume.id, out)
    except EngineNotFound:
        return True
    except Exception as exc:  # noqa: BLE001 - the reaping goes on; the volume stays unless forced
        log.warning("the web archive %s could not be kept: %s", volume.id, exc)
    if forced:
        discard(volume.id)
    return forced
