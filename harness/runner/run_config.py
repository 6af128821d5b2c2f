"""DIR/run.json: what a run was started with, so a resume cannot silently mix configs.

`RunConfig.of` derives the record from the run's one configuration (harness/config.py), with what
only the run knows (the image, the dataset's fingerprint, the website's hash, the template's). Its
sections are typed; a section is written and fingerprinted as it was given (`as_written`: the
fields set, so a run.json of another version reads back, and compares, as it was written).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

from filelock import AcquireReturnProxy, FileLock, Timeout
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.agents.contract import Limits, UserSimulation
from harness.config import RunConfiguration, Selection
from harness.datasets import hub
from harness.environments.mcp_config import McpServer
from harness.environments.websearch.guard import DEFAULT_BLOCK
from harness.errors import InputError
from harness.fsutil import write_atomic
from harness.models.config import ModelSection
from harness.results.layout import RunDir
from harness.sandbox.contract import canonical_size
from harness.sandbox.registry import DEFAULT as DEFAULT_PROVIDER

# Fields that change results; `selection` and the dataset path are left out on purpose
# (a resume may widen --limit; a moved dataset with the same content is the same dataset). A field
# that is None is left out of the fingerprint (dataset_revision of a local dataset: as before it existed).
FINGERPRINTED = ("dataset_fingerprint", "dataset_revision", "model", "model_settings", "agent", "image", "limits",
                 "scorers", "environment", "user", "epochs", "prompt_template")

OPTIONAL = ("dataset_revision", "dataset_subset", "epochs_default", "prices")  # in run.json only when set


class Environment(BaseModel):
    """Where the instances ran: the sandbox's resources and network, the provider when not the
    default, the offline website (its name and the hash of its folder) when one was served."""

    model_config = ConfigDict(frozen=True)

    network: str = "none"
    memory: str = "2g"
    cpus: float = 1.0
    disk: str = "2g"
    provider: str | None = None
    website: tuple[str, str] | None = None
    # web_search and the leakage guard, when the run searches or changed the block list: "PROVIDER HASH"
    # (the hash of SearchSettings.public(): options, results, block list; never a key)
    search: str | None = None
    mcp: tuple[McpServer, ...] | None = None  # the MCP servers, when there are any (no secrets: variables' names)

    @field_validator("memory", "disk")
    @classmethod
    def _one_spelling(cls, size: str) -> str:
        """--memory 2gb and 2g are one size: written, read back and compared as '2g' (a run.json of either)."""
        return canonical_size(size)


class RunConfig(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    dataset: str
    dataset_fingerprint: str
    # a Hub dataset's commit sha (harness/datasets/hub.py): a resume after its branch moved is refused
    dataset_revision: str | None = None
    # --subset: the dataset's folder read (a Hub config: Gaia2's execution, mini, ...); its content is in the
    # dataset's fingerprint. Not fingerprinted.
    dataset_subset: str | None = None
    model: str
    # ModelSection.public(): never secrets; a replay file by its content
    model_settings: ModelSection = Field(default_factory=lambda: ModelSection(name=""))
    agent: str
    image: str
    limits: Limits = Field(default_factory=Limits)  # what a rescore's scorers are told too
    scorers: list[str] = Field(default_factory=list)
    selection: Selection = Field(default_factory=Selection)
    environment: Environment = Field(default_factory=Environment)
    user: UserSimulation = Field(default_factory=UserSimulation)  # the simulated user
    epochs: int = 1  # --epochs: runs of each instance
    # the benchmark whose default `epochs` is, when --epochs was not given (Gaia2's 3); not fingerprinted
    epochs_default: str | None = None
    prompt_template: str = "default"  # --prompt-template: "default", or the sha256 of the file's text
    # --reducer: how the report reduces the epochs (the first is the headline); a resume may change
    # them, as a rescore may change its scorers' report: not fingerprinted.
    reducers: list[str] = Field(default_factory=list)
    # "unset" when --model's section gives no price_*_per_1k: its calls' cost is unknown, not $0 (the report
    # says "not priced"); None (left out of run.json): priced, or a replay model. Not fingerprinted.
    prices: Literal["unset"] | None = None
    # Every run into this directory, oldest first: the ids its containers carry (`harness cleanup
    # --run-id`). Not fingerprinted: each run adds its own.
    run_ids: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, cfg: RunConfiguration, *, dataset_fingerprint: str, image: str, model_settings: dict[str, Any],
           website: tuple[str, str] | None, prompt_template: str, run_id: str,
           dataset_revision: str | None = None) -> RunConfig:
        """The record of a run of `cfg` (every field of its sections given: all are written)."""
        sandbox = cfg.sandbox
        # provider and website only when there is one: run.json holds the fields given (as_written)
        given: dict[str, Any] = {"network": sandbox.network, "memory": sandbox.memory, "cpus": sandbox.cpus,
                                 "disk": sandbox.disk}
        if sandbox.provider != DEFAULT_PROVIDER:
            given["provider"] = sandbox.provider
        if website is not None:
            given["website"] = website
        if (cfg.search.offered and not cfg.search.automatic) or cfg.search.block != DEFAULT_BLOCK:
            public = json.dumps(cfg.search.public(), sort_keys=True)
            given["search"] = f"{cfg.search.provider} {hashlib.sha256(public.encode()).hexdigest()[:12]}"
        if cfg.mcp:
            given["mcp"] = cfg.mcp
        environment = Environment.model_validate(given)
        return cls(dataset=hub.shown(cfg.dataset.path), dataset_fingerprint=dataset_fingerprint,
                   dataset_revision=dataset_revision, dataset_subset=cfg.dataset.subset, model=cfg.model_flag,
                   model_settings=ModelSection.model_validate(model_settings), agent=cfg.agent, image=image,
                   limits=_as_before(Limits, cfg.limits), scorers=cfg.scoring.recorded(),
                   selection=_as_before(Selection, cfg.selection), environment=environment,
                   user=UserSimulation(**cfg.user.model_dump()), epochs=cfg.epochs.count,
                   epochs_default=cfg.epochs.default,
                   reducers=list(cfg.epochs.reducers), prompt_template=prompt_template, run_ids=[run_id],
                   prices=None if cfg.model.cost_known() else "unset")

    def as_written(self, name: str) -> Any:
        """Field `name` as run.json holds it: a section by the fields it was given."""
        value = getattr(self, name)
        return value.model_dump(mode="json", exclude_unset=True) if isinstance(value, BaseModel) else value

    def to_json(self) -> dict[str, Any]:  # dataset_revision (hf:// only), prices and the like: left out when None
        return {name: value for name in type(self).model_fields
                if (value := self.as_written(name)) is not None or name not in OPTIONAL}

    def fingerprint(self) -> str:
        payload = {name: value for name in FINGERPRINTED if (value := self.as_written(name)) is not None}
        blob = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# Keys added to a section after run directories existed: written only when set, so a run.json made
# before them is the file a resume writes back, and its fingerprint is unchanged.
ADDED_SINCE = ("max_instance_cost", "level")
S = TypeVar("S", bound=BaseModel)


def _as_before(cls: type[S], section: BaseModel) -> S:
    given = section.model_dump()
    for key in ADDED_SINCE:
        if given.get(key) is None:
            given.pop(key, None)
    return cls(**given)


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


def diff(old: RunConfig, new: RunConfig) -> list[str]:
    """Human-readable differences in the fingerprinted fields ("image changed (a -> b)")."""
    out: list[str] = []
    for name in FINGERPRINTED:
        a, b = old.as_written(name), new.as_written(name)
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
    text = json.dumps({**config.to_json(), "fingerprint": config.fingerprint()}, indent=2) + "\n"
    old = None
    if path.exists() and not force:
        try:
            old = load_run_config(output_dir)
        except InputError as exc:
            raise InputError(f"refusing to resume into {output_dir}: {exc}; "
                             "use --force to resume anyway or choose another --output-dir") from exc
        if old is not None and old.fingerprint() != config.fingerprint():  # None: removed since exists()
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

    def acquire(self, *args: Any, **kwargs: Any) -> AcquireReturnProxy[Self]:
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
