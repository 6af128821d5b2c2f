"""A Harbor task's artifacts (task.toml `artifacts = [...]`): collected out of the agent's sandbox into the run
directory once the agent's turns are over (or ran out of time), for every task that declares them (and the agent's
/logs/artifacts, Harbor's conventional folder, whenever it holds something), and, for a separate verifier, put into
the verifier's own sandbox at the paths they came from (the conventional folder at /logs/artifacts), as Harbor 0.25
does
(harbor/trial/artifact_handler.py).

On the host they go beside the instance's trace (`<trace stem>-artifacts/`, per attempt), laid out as Harbor lays
out a trial's artifacts/: an entry under its source path without the leading `/` (`/app/out.txt` ->
`app/out.txt`), or under its `destination`, and a manifest.json saying, per entry, its source, where it went, its
type and its status (ok, empty, failed, refused).

What the agent left is not trusted: it is packed in the sandbox (after every process of the agent's has ended) by
a short Python script that stores regular files and folders only; a link or any other kind of file is left out and
named in the entry's status (`refused`), an entry that is itself a link is refused whole, and the whole collection
holds at most MAX_BYTES (past it the entry fails, named). The host unpacks with tarfile's `data` filter, into a
folder of its own. `exclude` patterns (Harbor's tar --exclude) match a path's name or its path in the entry.
"""

from __future__ import annotations

import io
import json
import posixpath
import shlex
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from harness.errors import SandboxFileNotFound, SandboxOutputLimit
from harness.sandbox.contract import Sandbox

CONVENTION = "/logs/artifacts"  # Harbor's folder an agent publishes into
MAX_BYTES = 64 * 2**20  # the most one attempt's artifacts may hold (their files' bytes)
MAX_ENTRIES = 10_000  # and the most files and folders
PER_ENTRY = 2048  # the most a tar adds per file (its headers, a PAX record, the padding of its last block)
PACK = "/tmp/harness-artifact.tar"
STAGE = "/tmp/harness-artifacts"
TIMEOUT_S = 120.0
MANIFEST = "manifest.json"

# Packs sys.argv[1] (absolute) into sys.argv[5], regular files and folders only, at most sys.argv[2] bytes in at
# most sys.argv[3] entries, leaving out names matching the patterns in sys.argv[4] (JSON); prints a JSON line:
# type, bytes, entries, refused (paths left out).
_PACKER = r"""
import fnmatch, json, os, stat, sys, tarfile
source, budget, most, patterns, pack = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]), \
    sys.argv[5]
def say(**facts):
    print(json.dumps(facts)); sys.exit(0)
try:
    top = os.lstat(source)
except FileNotFoundError:
    say(type="missing")
if stat.S_ISLNK(top.st_mode):
    say(type="link")
def left_out(rel):
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(os.path.basename(rel), p) for p in patterns)
refused, size, count = [], 0, 0
with tarfile.open(pack, "w", format=tarfile.PAX_FORMAT) as tar:
    def put(path, rel):
        global size, count
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode):
            size += info.st_size
        elif not stat.S_ISDIR(info.st_mode):
            refused.append(rel)
            return False
        count += 1
        if size > budget or count > most:
            say(type="too_big", bytes=size, entries=count)
        tar.add(path, arcname=rel, recursive=False)
        return stat.S_ISDIR(info.st_mode)
    if put(source, "x"):
        for root, dirs, files in os.walk(source):
            base = os.path.relpath(root, source)
            for name in sorted(dirs) + sorted(files):
                rel = os.path.normpath(os.path.join(base, name))
                if left_out(rel):
                    if name in dirs:
                        dirs.remove(name)
                    continue
                if not put(os.path.join(root, name), os.path.join("x", rel)) and name in dirs:
                    dirs.remove(name)
say(type="directory" if stat.S_ISDIR(top.st_mode) else "file", bytes=size, entries=count, refused=refused[:20],
    refused_count=len(refused))
"""


@dataclass
class Entry:
    source: str
    destination: str | None = None
    exclude: list[str] = field(default_factory=list)

    def relative(self) -> str:
        """Where it goes under the attempt's artifacts folder (Harbor's layout)."""
        parts = [p for p in PurePosixPath(self.destination or self.source).parts if p not in ("", "/", "..")]
        return "/".join(parts) or "."


def entries(declared: list[dict]) -> list[Entry]:
    """The task's artifacts (a path, or a table) with Harbor's conventional folder first unless declared."""
    found = [Entry(item) if isinstance(item, str) else
             Entry(item["source"], item.get("destination") or None, list(item.get("exclude") or []))
             for item in declared]
    if not any(e.source.rstrip("/") == CONVENTION for e in found):
        found.insert(0, Entry(CONVENTION))
    return found


def collect(sandbox: Sandbox, wanted: list[Entry], folder: Path, declared: bool) -> list[dict]:
    """Every entry out of `sandbox` into `folder`; the manifest (also written there). Nothing is written when the
    task declares no artifacts and its conventional folder holds nothing."""
    manifest, budget, room = [], MAX_BYTES, MAX_ENTRIES
    for entry in wanted:
        facts = _pack(sandbox, entry, budget, room)
        kind = str(facts.get("type"))
        status = {"missing": "failed", "link": "refused", "too_big": "failed"}.get(kind, "ok")
        guessed = "file" if posixpath.splitext(entry.source)[1] else "directory"  # as Harbor guesses
        record = {"source": entry.source, "destination": f"artifacts/{entry.relative()}",
                  "type": kind if kind in ("file", "directory") else guessed, "status": status}
        if facts.get("error"):  # the packer did not finish (a file its user may not read...)
            record["detail"] = f"not packed: {facts['error']}"
        elif kind == "link":
            record["detail"] = "a link: not followed"
        elif kind == "too_big":
            record["detail"] = f"this attempt's artifacts hold more than {MAX_BYTES} bytes or {MAX_ENTRIES} entries"
        elif kind in ("file", "directory"):
            size, count = int(facts.get("bytes", 0)), int(facts.get("entries", 0))
            budget, room = budget - size, room - count
            if facts.get("refused_count"):
                record["refused"] = facts["refused"]
                record["detail"] = f"{facts['refused_count']} link(s) or special file(s) left out"
            if not _unpack(sandbox, folder / entry.relative(), size + PER_ENTRY * (count + 8)):
                record.update(status="failed", detail="the packed artifact could not be read")
            elif kind == "directory" and not any((folder / entry.relative()).iterdir()):
                record["status"] = "empty"
        if entry.source.rstrip("/") == CONVENTION and kind == "missing":
            record["status"] = "empty"
        manifest.append(record)
    if declared or any(r["status"] == "ok" for r in manifest):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    else:
        _remove(folder)  # an empty /logs/artifacts of a task that declares nothing: no folder in the run
    return manifest


def _pack(sandbox: Sandbox, entry: Entry, budget: int, room: int) -> dict:
    # -I: none of the environment's or the user's site (what agent code may have planted) is read
    argv = ["python3", "-I", "-c", _PACKER, entry.source, str(max(budget, 0)), str(max(room, 0)),
            json.dumps(entry.exclude), PACK]
    ran = sandbox.exec(argv, timeout=TIMEOUT_S, cwd="/")
    try:
        facts = dict(json.loads(ran.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        facts = {"type": "missing", "error": (ran.stderr or ran.stdout)[-300:]}
    if facts.get("type") not in ("file", "directory"):
        sandbox.exec(["rm", "-f", PACK], timeout=TIMEOUT_S, cwd="/")
    return facts


def _unpack(sandbox: Sandbox, target: Path, most: int) -> bool:
    """The packed entry (its top member named `x`, at most `most` bytes) unpacked at `target`, through tarfile's
    data filter."""
    try:
        data = sandbox.read_file(PACK, max_bytes=most)
    except (SandboxFileNotFound, SandboxOutputLimit):
        return False
    finally:
        sandbox.exec(["rm", "-f", PACK], timeout=TIMEOUT_S, cwd="/")
    staging = target.parent / f".{target.name}.unpacking"
    staging.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                if not (member.isfile() or member.isdir()):
                    continue
                tar.extract(member, staging, filter="data")
        unpacked = staging / "x"
        if not unpacked.exists():
            return False
        unpacked.rename(target)
        return True
    except (tarfile.TarError, OSError):
        return False
    finally:
        _remove(staging)


def _executables(collected: Path, target: str) -> list[str]:
    """Where the collected entry's executable files go in the verifier's sandbox (their mode as the agent left
    it, which the copy in does not keep)."""
    found = [collected] if collected.is_file() else sorted(collected.rglob("*"))
    return [posixpath.join(target, path.relative_to(collected).as_posix()).removesuffix("/.")
            for path in found if path.is_file() and path.stat().st_mode & 0o100]


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def seed(judge: Sandbox, wanted: list[Entry], folder: Path, manifest: list[dict]) -> str | None:
    """The collected entries into the verifier's own sandbox at their source paths (the conventional folder at
    CONVENTION, made in any case, as Harbor's verifier has it); None, or why it could not be done."""
    made = judge.shell(f"mkdir -p {CONVENTION}", timeout=TIMEOUT_S, cwd="/")
    if not made.ok:
        return f"{CONVENTION} could not be made in the verifier's sandbox: {made.stderr.strip()[-300:]}"
    for entry, record in zip(wanted, manifest, strict=True):
        if record["status"] not in ("ok", "empty") or not (folder / entry.relative()).exists():
            continue
        target = CONVENTION if entry.source.rstrip("/") == CONVENTION else entry.source
        judge.shell(f"rm -rf {STAGE}", timeout=TIMEOUT_S, cwd="/")
        judge.copy_in(folder, [entry.relative()], dest=STAGE)
        quoted, staged = shlex.quote(target), shlex.quote(f"{STAGE}/{entry.relative()}")
        ran = judge.shell(f"mkdir -p \"$(dirname {quoted})\" && rm -rf {quoted} && cp -a {staged} {quoted} "
                          f"&& rm -rf {STAGE}", timeout=TIMEOUT_S, cwd="/")
        if ran.ok and (runnable := _executables(folder / entry.relative(), target)):  # copy_in stores 0644
            ran = judge.exec(["xargs", "-0", "chmod", "a+x", "--"], stdin="\0".join(runnable), timeout=TIMEOUT_S,
                             cwd="/")
        if not ran.ok:
            why = ran.stderr.strip()[-300:]
            return f"the artifact {entry.source} could not be put in the verifier's sandbox: {why}"
    return None
