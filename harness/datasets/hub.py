"""Hugging Face Hub datasets: ``--dataset hf://OWNER/NAME[@REVISION]``, read by the local loaders.

The reference names a dataset repository and a revision (a branch, a tag or a commit; default
``main``). `fetch` downloads it with `huggingface_hub.snapshot_download` into the library's own
cache (``HF_HUB_CACHE`` / ``HF_HOME``), with the library's token (``HF_TOKEN``, or the one
``hf auth login`` saved) and its offline switch (``HF_HUB_OFFLINE=1``: the cache alone); with
``--subset C`` only the folder ``C/`` is fetched (a config of a repository laid out one folder per config, as
Gaia2's: ``execution/validation-00000-of-00001.parquet``), else with ``--split S`` only ``2023/S/`` (GAIA's).
It returns the resolved commit sha, which the run records (run.json's ``dataset_revision``,
fingerprinted: a resume after ``main`` moved is refused, naming both shas).

The cache's snapshot files are symlinks into its ``blobs/``, outside the snapshot folder, which
the sandbox packer refuses (harness/sandbox/files.py follows no link out of a dataset's folder).
So the snapshot is mirrored, as hard links to the blobs (a copy across filesystems), under
``HARNESS_STATE_DIR/hub/<repo folder>/<sha>/``: plain files, immutable as the commit is, that the
format adapters of harness/datasets/load.py then read as any local folder. A snapshot entry that is a
symlink to anything but a file of the repository's own ``blobs/`` (a link planted in the cache, to a key
or a file elsewhere on the host) is refused as a local dataset's link out of its folder is (exit 2,
naming the entry and its target), before anything is mirrored: before, it was mirrored as a hard link
to its target and packed into the sandbox.

Every failure is an InputError (exit 2) saying which: a gated repository without a token (or
with one that has no access), a repository or revision that does not exist, no network (or
HF_HUB_OFFLINE) and nothing cached. This is the only module that imports huggingface_hub, and
only when it downloads.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InputError
from harness.fsutil import inside
from harness.settings import state_dir

PREFIX = "hf://"
# pathlib folds the scheme's double slash ("hf:/OWNER/NAME"): a --dataset parsed as a Path reads too.
_REFERENCE = re.compile(r"hf:/{1,2}(?P<owner>[^/@\s]+)/(?P<name>[^/@\s]+)(?:@(?P<revision>\S+))?")


@dataclass(frozen=True)
class HubRef:
    owner: str
    name: str
    revision: str | None = None  # None: the repository's default branch

    @property
    def repo_id(self) -> str:
        return f"{self.owner}/{self.name}"

    def __str__(self) -> str:
        return PREFIX + self.repo_id + (f"@{self.revision}" if self.revision else "")


def is_reference(path: str | Path) -> bool:
    """Whether `path` is meant as a Hub reference (it may still be malformed: see `parse`)."""
    return str(path).startswith("hf:/")


def parse(path: str | Path) -> HubRef | None:
    """The Hub reference `path` spells, None when it is no Hub reference; InputError naming --dataset
    when it starts like one but is not ``hf://OWNER/NAME[@REVISION]``."""
    if not is_reference(path):
        return None
    found = _REFERENCE.fullmatch(str(path))
    if found is None:
        raise InputError(f"--dataset {shown(path)}: a Hub dataset is hf://OWNER/NAME or hf://OWNER/NAME@REVISION")
    return HubRef(found["owner"], found["name"], found["revision"])


def shown(path: str | Path) -> str:
    """`path` as the user spelled it: a Hub reference with its ``hf://``, anything else as is."""
    text = str(path)
    return PREFIX + text.removeprefix("hf:/").lstrip("/") if is_reference(text) else text


def fetch(ref: HubRef, split: str | None, subset: str | None = None) -> tuple[Path, str]:
    """(the local folder holding the dataset at `ref`, the commit sha it resolved to)."""
    import huggingface_hub
    from huggingface_hub import errors

    patterns = [f"{subset}/*"] if subset is not None else [f"2023/{split}/*"] if split is not None else None
    try:
        snapshot = Path(huggingface_hub.snapshot_download(
            ref.repo_id, repo_type="dataset", revision=ref.revision, allow_patterns=patterns))
    except errors.GatedRepoError as exc:
        raise InputError(f"--dataset {ref}: the repository is gated and " + (
            "no Hugging Face token is set: accept its terms on the Hub, then set HF_TOKEN"
            if huggingface_hub.get_token() is None else
            "the token in use (HF_TOKEN or the saved login) has no access to it: accept its terms on the Hub "
            "with that account") + f" ({_status(exc)})") from None
    except errors.RevisionNotFoundError as exc:
        raise InputError(f"--dataset {ref}: the repository has no revision {ref.revision!r} ({_status(exc)})") from None
    except errors.RepositoryNotFoundError as exc:
        raise InputError(f"--dataset {ref}: no dataset repository {ref.repo_id!r} on the Hub, or it is private "
                         f"and the token in use has no access ({_status(exc)})") from None
    except errors.LocalEntryNotFoundError as exc:  # IncompleteSnapshotError too
        why = ("HF_HUB_OFFLINE is set" if huggingface_hub.constants.HF_HUB_OFFLINE
               else "the Hub could not be reached")
        raise InputError(f"--dataset {ref}: {why} and the Hub cache ({huggingface_hub.constants.HF_HUB_CACHE}) "
                         f"holds no complete copy of it{_at(split, subset)} ({_first_line(exc)})") from None
    except (errors.HfHubHTTPError, OSError, ValueError) as exc:  # another HTTP status, a bad name
        raise InputError(f"--dataset {ref}: the Hub download failed: {type(exc).__name__}: "
                         f"{_first_line(exc)}") from None
    sha = snapshot.name
    if (problem := foreign_link(snapshot)) is not None:
        raise InputError(f"--dataset {ref}: {problem} (a dataset's links may point only at its own files)")
    folder = state_dir() / "hub" / snapshot.parent.parent.name / sha
    try:
        return mirror(snapshot, folder), sha
    except OSError as exc:
        raise InputError(f"--dataset {ref}: the snapshot could not be mirrored into {folder}: {exc}") from None


def foreign_link(snapshot: Path) -> str | None:
    """The first entry of `snapshot` (snapshots/<sha>/ of a cached repository) that is a symlink to anything
    but a file of the repository's `blobs/`, described, or None."""
    blobs = (snapshot.parent.parent / "blobs").resolve()
    for path in sorted(snapshot.rglob("*")):
        if not path.is_symlink():
            continue
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError) as exc:  # a dangling link, a loop
            return f"{path} in the Hub cache is a symlink that cannot be resolved ({exc})"
        if not inside(blobs, real) or not real.is_file():
            return f"{path} in the Hub cache is a symlink to {real}, not to a file of the repository's {blobs}"
    return None


def mirror(snapshot: Path, folder: Path) -> Path:
    """`folder` holding every file of `snapshot` as a plain file (a hard link to the blob, else a
    copy); files already there stay (a commit's files never change)."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(snapshot.rglob("*")):
        target = folder / path.relative_to(snapshot)
        if not path.is_file() or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            os.link(path.resolve(), tmp)
        except OSError:  # another filesystem, or no hard links there
            shutil.copyfile(path, tmp)
        os.replace(tmp, target)
    return folder


def _at(split: str | None, subset: str | None) -> str:
    named = [f"{what} {value!r}" for what, value in (("subset", subset), ("split", split)) if value is not None]
    return f" ({', '.join(named)})" if named else ""


def _status(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    return f"HTTP {response.status_code}" if response is not None else type(exc).__name__


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
