"""What output.jsonl may hold when a run resumes from it: decided once, before any container.

Rules (`settle`, called by `harness run` under the output-dir lock):
- A torn last line (a crash mid-write) is truncated away.
- A damaged line before the last (cut short, two rows glued on one line: a crash on a full disk, two
  shard files concatenated; or not a row at all) is set aside: moved as it is to
  DIR/output.set-aside.jsonl, output.jsonl rewritten without it (atomically). Its instance has no row
  then, so it runs again unless an earlier row of it finished; the run says which line and instance.
- Rows an earlier run rescued (DIR/output.rescue.jsonl) are merged next.
- Every row carries what it was made from: `instance_hash` (`instance_hash`: the instance's id,
  question, answer, level, file names and expectations) and `dataset` (the dataset's fingerprint,
  attachments' bytes included). A run.json with this dataset's fingerprint vouches for the rows beside
  it. Without one (output.jsonl copied in without its run.json, or --force over another dataset) each
  row must match this dataset's instance of its id: a row of an id the dataset lacks, of other
  content, or with no hash (written before rows carried one) is foreign. Foreign rows are refused
  (exit 2, naming the first line and the fix); with --force they are set aside like damaged lines and
  their instances run again, so a directory never mixes two datasets' rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import InputError
from harness.results.layout import RunDir
from harness.results.store import Loaded, RowKey, load, merge_rescue, repair

if TYPE_CHECKING:
    from harness.datasets.model import Instance

_IDS = re.compile(rb'\{"instance_id":("(?:[^"\\]|\\.)*")')


def instance_hash(instance: Instance) -> str:
    """A short digest of what defines the instance's result (its files by name: their bytes are in
    the dataset fingerprint, which would cost a read of every attachment per run)."""
    record = [instance.instance_id, instance.question, instance.answer, instance.level, instance.files,
              instance.expectations()]
    return hashlib.sha256(json.dumps(record, ensure_ascii=True, default=str).encode()).hexdigest()[:16]


def settle(out: Path, instances: Iterable[Instance], *, vouched: bool, force: bool,
           scanned: Loaded | None = None) -> tuple[Loaded, list[str]]:
    """Read output.jsonl for resuming after putting it right (see the module's rules); return what
    resuming needs of its rows and what was done, to be said. InputError: foreign rows without --force,
    or a file that cannot be rewritten. `scanned`: the file as `load(out, RowKey, damaged_ok=True)` read it
    under the same lock (not read again)."""
    layout = RunDir(Path(out).parent)
    notes: list[str] = []
    scanned = scanned if scanned is not None else load(out, RowKey, damaged_ok=True)
    if scanned.damaged:
        lines = [number for number, _ in scanned.damaged]
        _set_aside(out, set(lines), layout.set_aside)
        named = "; ".join(f"line {number}: {_named(raw)}" for number, raw in scanned.damaged[:5])
        notes.append(f"set aside {len(lines)} damaged line(s) of {out} in {layout.set_aside} (cut short, or "
                     f"two rows on one line; {named}): their instances run again unless an earlier row of "
                     "them finished")
        scanned = load(out, RowKey)
    elif repair(out, scanned):
        notes.append("repaired a torn last line in output.jsonl (a crash mid-write)")
    try:
        merged = merge_rescue(out)
    except OSError as exc:
        raise InputError(f"cannot merge the rescued rows of {layout.rescue} into {out}: {exc}") from None
    if merged:
        notes.append(f"merged {merged} row(s) rescued by an earlier run from {layout.rescue}")
        scanned = load(out, RowKey)
    if vouched or not scanned.rows:
        return scanned, notes
    foreign = refuse_foreign(out, instances, vouched=vouched, force=force)
    if not foreign:
        return scanned, notes
    first = foreign[0]
    _set_aside(out, {number for number, _, _ in foreign}, layout.set_aside)
    notes.append(f"--force: set aside {len(foreign)} row(s) of output.jsonl not made from this dataset's instances "
                 f"in {layout.set_aside} (line {first[0]}: instance {first[1]!r}, {first[2]}); those instances "
                 "run again")
    return load(out, RowKey), notes


def refuse_foreign(out: Path, instances: Iterable[Instance], *, vouched: bool,
                   force: bool) -> list[tuple[int, str, str]]:
    """The rows not made from this dataset's instances, as (line, instance id, why) (none when run.json
    vouches for them); InputError when there are any and no --force. Read only: `harness run` asks it
    before it writes its run.json (which would vouch for them next time)."""
    if vouched or not Path(out).exists():
        return []
    foreign = _foreign(out, {i.instance_id: instance_hash(i) for i in instances})
    if foreign and not force:
        first = foreign[0]
        raise InputError(f"refusing to resume into {Path(out).parent}: {len(foreign)} row(s) of output.jsonl were not "
                         f"made from this dataset's instances and no run.json of this dataset vouches for them (line "
                         f"{first[0]}: instance {first[1]!r}, {first[2]}); choose another --output-dir, or --force "
                         "to set them aside and run those instances again")
    return foreign


def _foreign(out: Path, hashes: dict[str, str]) -> list[tuple[int, str, str]]:
    """(line, instance id, why) of the rows that do not match this dataset's instance of their id."""
    found = []
    with open(out, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if raw.isspace() or not raw.endswith(b"\n"):
                continue
            try:
                key = RowKey.model_validate_json(raw)
            except ValueError:  # a damaged line (settle sets it aside)
                continue
            want = hashes.get(key.instance_id)
            if want is None:
                found.append((number, key.instance_id, "not in this dataset"))
            elif key.instance_hash is None:
                found.append((number, key.instance_id, "a row without a content hash (older than them)"))
            elif key.instance_hash != want:
                found.append((number, key.instance_id, "made from another question, answer or files"))
    return found


def _named(raw: bytes) -> str:
    """The instance ids a damaged line still shows (a glued line shows two)."""
    ids = []
    for literal in _IDS.findall(raw):
        try:
            ids.append(json.loads(literal))
        except ValueError:
            continue
    return "instance " + ", ".join(map(repr, ids)) if ids else "no instance id left"


def _set_aside(out: Path, lines: set[int], aside: Path) -> None:
    """Move these lines (and a torn last line) of `out` to the end of `aside`; `out` is replaced at once."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(out, "rb") as source, open(tmp, "wb") as kept, open(aside, "ab") as moved:
            for number, raw in enumerate(source, 1):
                if not raw.endswith(b"\n"):
                    moved.write(raw + b"\n")
                    break
                (moved if number in lines else kept).write(raw)
            for fh in (moved, kept):
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot set damaged or foreign lines of {out} aside in {aside}: {exc}") from None
