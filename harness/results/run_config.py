"""DIR/run.json: what a run was started with, so a resume cannot silently mix configs."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.errors import InputError
from harness.fsutil import write_atomic
from harness.results.layout import RunDir

# Fields that change results; `selection` and the dataset path are left out on purpose
# (a resume may widen --limit; a moved dataset with the same content is the same dataset).
FINGERPRINTED = ("dataset_fingerprint", "model", "model_settings", "agent", "image", "limits", "scorers",
                 "environment", "user", "epochs", "prompt_template")


class RunConfig(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    dataset: str
    dataset_fingerprint: str
    model: str
    model_settings: dict[str, Any] = Field(default_factory=dict)  # never secrets
    agent: str
    image: str
    limits: dict[str, Any] = Field(default_factory=dict)  # Limits: what a rescore's scorers are told too
    scorers: list[str] = Field(default_factory=list)
    selection: dict[str, Any] = Field(default_factory=dict)  # ids/skip/offset/stride/shuffle/seed/limit
    environment: dict[str, Any] = Field(default_factory=dict)  # provider, sandbox limits, network, website hash
    user: dict[str, Any] = Field(default_factory=dict)  # the simulated user (UserSimulation)
    epochs: int = 1  # --epochs: runs of each instance
    prompt_template: str = "default"  # --prompt-template: "default", or the sha256 of the file's text
    # --reducer: how the report reduces the epochs (the first is the headline); a resume may change
    # them, as a rescore may change its scorers' report: not fingerprinted.
    reducers: list[str] = Field(default_factory=list)
    # Every run into this directory, oldest first: the ids its containers carry (`harness cleanup
    # --run-id`). Not fingerprinted: each run adds its own.
    run_ids: list[str] = Field(default_factory=list)

    def fingerprint(self) -> str:
        payload = {name: getattr(self, name) for name in FINGERPRINTED}
        blob = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


def diff(old: RunConfig, new: RunConfig) -> list[str]:
    """Human-readable differences in the fingerprinted fields ("image changed (a -> b)")."""
    out: list[str] = []
    for name in FINGERPRINTED:
        a, b = getattr(old, name), getattr(new, name)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                if a.get(key) != b.get(key):
                    out.append(f"{name}.{key} changed ({_short(a.get(key))} -> {_short(b.get(key))})")
        else:
            out.append(f"{name} changed ({_short(a)} -> {_short(b)})")
    return out


def load_run_config(output_dir: Path) -> RunConfig | None:
    """DIR/run.json, or None when there is none; InputError when it is unreadable."""
    path = RunDir(Path(output_dir)).run_json
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        raw.pop("fingerprint", None)
        return RunConfig.model_validate(raw)
    except (ValueError, ValidationError) as exc:
        raise InputError(f"{path} is unreadable ({str(exc).splitlines()[0]})") from exc


def vouches(output_dir: Path, dataset_fingerprint: str) -> bool:
    """True when DIR/run.json was written for this dataset (its rows need no check of their own:
    harness/results/integrity.py); read before a run replaces it."""
    try:
        old = load_run_config(output_dir)
    except InputError:
        return False
    return old is not None and old.dataset_fingerprint == dataset_fingerprint


def save_or_check(output_dir: Path, config: RunConfig, *, force: bool) -> RunConfig | None:
    """Write DIR/run.json, or refuse to resume into DIR when the fingerprint differs; return the
    configuration of the run before (None: none, or unreadable)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    layout = RunDir(output_dir)
    path = layout.run_json
    config = config.model_copy(update={"run_ids": list(dict.fromkeys(_old_run_ids(path) + config.run_ids))})
    text = json.dumps({**config.model_dump(mode="json"), "fingerprint": config.fingerprint()}, indent=2) + "\n"
    old = None
    if path.exists() and not force:
        try:
            old = load_run_config(output_dir)
        except InputError as exc:
            raise InputError(f"refusing to resume into {output_dir}: {exc}; "
                             "use --force to resume anyway or choose another --output-dir") from exc
        if old.fingerprint() != config.fingerprint():
            changes = "; ".join(diff(old, config)) or "configuration changed"
            raise InputError(
                f"refusing to resume into {output_dir}: {changes}; "
                "use --force to resume anyway or choose another --output-dir"
            )
    elif path.exists():  # force: keep the previous config next to the new one (the files beside
        os.replace(path, layout.run_json_prev)  # it may not match it: no earlier config is returned)
    try:
        write_atomic(path, text)
    except OSError as exc:  # a full disk, a read-only mount: before any container, the output dir's fault
        raise InputError(f"cannot write {path}: {exc}") from None
    return old


def _old_run_ids(path: Path) -> list[str]:
    """The run ids an existing run.json lists (none when it is missing or unreadable)."""
    try:
        ids = json.loads(path.read_text(encoding="utf-8")).get("run_ids", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


class OutputDirLock(FileLock):
    """A FileLock that never waits: a second holder gets an InputError at once."""

    def acquire(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        kwargs["blocking"] = False
        try:
            return super().acquire(*args, **kwargs)
        except Timeout as exc:
            raise InputError(f"another harness run is writing to {Path(self.lock_file).parent}") from exc


def lock_output_dir(output_dir: Path) -> FileLock:
    """The output-dir lock (not yet held): `with lock_output_dir(d): ...` raises InputError if taken."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    return OutputDirLock(str(RunDir(output_dir).lock), timeout=0)
