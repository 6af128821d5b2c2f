"""Gaia2 scenarios (Meta's ARE, "Agents Research Environments") in ARE's JSON export format into `Instance`s.

Read: a folder of ``*.json`` files, one scenario each as ARE's exporter writes it (``version``
``are_simulation_v1``, ``metadata.definition.scenario_id``, ``apps``, ``events``), detected by its
first file; a ``.jsonl`` file, a scenario a line: the scenario object itself or a Hugging Face row
``{"id", "scenario_id", "data": "<the scenario as a JSON string>"}``; or a folder of the Hub's parquet files
of such rows, one config of ``meta-agents-research-environments/gaia2`` (``--subset execution``: the folder
``execution/`` holding ``validation-00000-of-00001.parquet``; --split picks the files ``SPLIT-*.parquet``),
read a batch of rows at a time with pyarrow. The root of such a repository (a folder of config folders) is
refused, naming its configs: one is named with --subset. ARE is never imported here (it runs inside the
gaia2 image): the structure its importer needs is checked with pydantic (`Scenario`).

instance_id = ``metadata.definition.scenario_id``; question = the ``content`` of the first user
message (the USER event ``AgentUserInterface.send_message_to_agent`` without dependencies); answer
``pass``: the verdict of ARE's judge, run in its judge's sandbox, for a solved scenario (the `gaia2` scorer,
harness/benchmarks/gaia2/scorer.py); image ``gaia2``; files = the scenario's own
file, named by ``metadata["scenario_file"]``: a folder's file itself, a JSONL line's or a parquet row's written
as ``scenario.json`` to ``HARNESS_STATE_DIR/gaia2/<24 hex digits of its text's sha256>/`` (once; nothing is
written after the first problem). Metadata: ``capability``
(lower case: the scenario's Gaia2 capability tag, else its first tag, else its ``config``, else the Hub
config's folder, when either names a capability, else None), ``variant`` ("agent2agent" or "noise" when the
scenario says it was augmented so, or its config ends ``_a2a`` / ``_noise``, as ARE names them; else
"standard": ARE applies both at run time), ``nb_turns`` (the user's messages to the agent), ``oracle_actions``
(its OracleEvents), ``tool_families`` (``["gaia2"]``: the agent gets the scenario's apps and no code, file or
browser tool, as in Gaia2).

Refused, every problem in one InputError naming the file (and line or row) and the scenario: not JSON, JSON nested
deeper than MAX_DEPTH or holding a number that is not finite (NaN, Infinity, 1e999), a clock field (the
definition's start_time, duration and time_increment_in_seconds, an event's event_time and event_relative_time)
outside [0, MAX_CLOCK_S], a version other than ``are_simulation_v1``, no scenario_id, a structure ARE's importer
refuses, no first user message, a scenario id given twice; --split but for the parquet layout. (Before, a scenario
nested 100,000 deep broke the load with a RecursionError, and a NaN or 1e308 clock broke ARE's clock in the
sandbox, an infra error retried.)
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationError

from harness.datasets.attachments import entry_problem
from harness.datasets.fingerprint import dataset_fingerprint
from harness.datasets.model import Dataset, Instance
from harness.datasets.problems import raise_problems, refuse_split
from harness.errors import InputError
from harness.fsutil import write_atomic
from harness.settings import state_dir

VERSION = "are_simulation_v1"  # the one ARE 1.2.0 reads
NAME = "gaia2"  # Instance.benchmark
EPOCHS = 3  # runs of each scenario when --epochs is not given: ARE's leaderboard runs (gaia2_submission NUM_RUNS)
HUB_COLUMNS = {"scenario_id", "data"}  # of the Hub's parquet rows (and "id")
CAPABILITIES = ("Adaptability", "Ambiguity", "Execution", "Search", "Time")  # CapabilityTag.gaia2_capabilities()
IMAGE = "gaia2"
TARGET = "pass"  # the target: the verdict of ARE's judge for a solved scenario (benchmarks/gaia2/scorer.py)
WRITTEN = "scenario.json"  # a JSONL line's scenario, as the sandbox receives it
MAX_DEPTH = 200  # levels of JSON nesting (ARE's exports have about ten): Python's own parser stops near 1,000
# A clock field's bound in seconds: a start time plus a duration plus an event's relative time stays below
# 2.5e11 s, the end of year 9999, past which ARE's clock cannot be a datetime.
MAX_CLOCK_S = 8e10
Clock = Annotated[float, Field(ge=0, le=MAX_CLOCK_S, allow_inf_nan=False)]


class Arg(BaseModel):
    name: str
    value: str | None = None


class Action(BaseModel):
    action_id: str
    app: str | None = None
    function: str | None = None
    args: list[Arg] | None = None


class Event(BaseModel):
    class_name: str
    event_type: str
    event_time: Clock | None
    event_id: str
    dependencies: list[str]
    event_relative_time: Clock | None
    action: Action | None = None

    def tells_agent(self) -> bool:
        """A message of the user to the agent (a turn)."""
        return self.event_type == "USER" and self.action is not None and \
            (self.action.app, self.action.function) == ("AgentUserInterface", "send_message_to_agent")


class Definition(BaseModel):
    scenario_id: str
    config: str | None = None
    tags: list[str] | None = None
    start_time: Clock | None = None
    duration: Clock | None = None
    time_increment_in_seconds: Clock | None = None
    has_a2a_augmentation: bool = False
    has_tool_augmentation: bool = False
    has_env_events_augmentation: bool = False


class Metadata(BaseModel):
    definition: Definition


class App(BaseModel):
    name: str
    class_name: str | None = None


class Scenario(BaseModel):
    """The parts of ARE's ExportedTrace (are/simulation/data_handler/models.py) its importer needs."""

    version: str
    metadata: Metadata
    apps: list[App] = []
    events: list[Event] = []


def _definition(data: dict[str, Any]) -> dict[str, Any]:
    metadata = data.get("metadata")
    definition = metadata.get("definition") if isinstance(metadata, dict) else None
    return definition if isinstance(definition, dict) else {}


def _scenario_id(data: dict[str, Any]) -> str | None:
    found = _definition(data).get("scenario_id")
    return found if isinstance(found, str) and found.strip() else None


def _is_scenario(data: Any) -> bool:
    return isinstance(data, dict) and str(data.get("version", "")).startswith("are_simulation") \
        and "scenario_id" in _definition(data)


class _NotFinite(ValueError):
    pass


def _constant(name: str) -> float:
    raise _NotFinite(name)


def _float(text: str) -> float:
    if not math.isfinite(number := float(text)):
        raise _NotFinite(text)
    return number


def _too_deep(data: Any) -> bool:
    """Whether `data` nests more than MAX_DEPTH levels (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                return True
            stack.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return False


def _parsed(text: str) -> tuple[Any, str | None]:
    """The JSON of `text`, or None and why it is not JSON the scenario may be (module docstring)."""
    try:
        data = json.loads(text, parse_constant=_constant, parse_float=_float)
    except _NotFinite as exc:
        return None, f"the number {str(exc)[:40]} is not finite"
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    except RecursionError:
        return None, f"JSON nested deeper than {MAX_DEPTH} levels"
    except ValueError as exc:  # an integer of more digits than Python converts
        return None, f"invalid JSON ({str(exc)[:200]})"
    if _too_deep(data):
        return None, f"JSON nested deeper than {MAX_DEPTH} levels"
    return data, None


def _unwrapped(line: str) -> tuple[str, Any, str | None]:
    """A JSONL line's scenario: its text, its JSON or why it is not JSON; a Hub row's is its ``data``."""
    row, error = _parsed(line)
    if isinstance(row, dict) and isinstance(row.get("data"), str) and "version" not in row:
        return row["data"], *_parsed(row["data"])
    return line, row, error


def _first_line(file: Path) -> str:
    with open(file, encoding="utf-8") as handle:
        return next((line for line in handle if line.strip()), "")


def _hub_rows(folder: Path) -> bool:
    """Whether `folder` holds parquet files of the Hub's scenario rows (its first file's columns say)."""
    first = next(iter(sorted(folder.glob("*.parquet"))), None)
    if first is None:  # before pyarrow's import (~70 ms of CPU), which every other benchmark's run would pay
        return False
    import pyarrow.parquet as pq

    try:
        return HUB_COLUMNS <= set(pq.read_schema(first).names)
    except (OSError, ValueError):  # not parquet: pyarrow's ArrowInvalid is a ValueError
        return False


def _configs(root: Path) -> list[str]:
    """The config folders of a Hub repository's root laid out as Gaia2's."""
    return [sub.name for sub in sorted(root.iterdir()) if sub.is_dir() and _hub_rows(sub)]


def _scenarios(files: list[Path]) -> bool:
    """Whether `files` are scenario files: the first that parses is a scenario; none parses, but one is refused as
    too deep or not finite (what load names)."""
    refused = False
    for file in files:
        data, error = _parsed(file.read_text(encoding="utf-8"))
        if error is None:
            return _is_scenario(data)
        refused = refused or not error.startswith("invalid JSON")
    return refused


def detect(path: Path) -> Path | None:
    """`path` when it is a folder of ARE scenario files, a JSONL of scenarios (or of Hub rows), a folder of the
    Hub's parquet rows or the root of such folders, else None."""
    try:
        if path.is_dir():
            files = sorted(path.glob("*.json"))
            if files:
                return path if _scenarios(files) else None
            return path if _hub_rows(path) or _configs(path) else None
        if path.suffix.lower() != ".jsonl" or not path.is_file():
            return None
        return path if _is_scenario(_unwrapped(_first_line(path))[1]) else None
    except (OSError, UnicodeDecodeError):
        return None


def _validated(data: Any) -> tuple[Scenario | None, str | None, list[str]]:
    """The scenario of one JSON value, its id (when it has one) and what is wrong with it."""
    if not isinstance(data, dict):
        return None, None, [f"expected a JSON object, got {type(data).__name__}"]
    scenario_id = _scenario_id(data)
    problems = [] if scenario_id else ["no metadata.definition.scenario_id"]
    if data.get("version") != VERSION:
        problems.append(f"version {data.get('version')!r} is not {VERSION!r}, the one ARE reads")
    if problems:
        return None, scenario_id, problems
    try:
        return Scenario.model_validate(data), scenario_id, []
    except ValidationError as exc:
        shown = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3]]
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        return None, scenario_id, [f"not the structure ARE reads: {'; '.join(shown)}{more}"]


def _question(scenario: Scenario) -> str | None:
    first = next((e for e in scenario.events if e.tells_agent() and not e.dependencies), None)
    args = (first.action.args if first is not None and first.action is not None else None) or []
    content = next((a.value for a in args if a.name == "content"), None)
    return content.strip() if content and content.strip() else None


def _capability(definition: Definition, config: str | None) -> str | None:
    tags = definition.tags or []
    found = next((t for t in tags if t in CAPABILITIES), None) or next(iter(tags), None)
    found = found or next((c for c in (definition.config, config) if c and c.capitalize() in CAPABILITIES), None)
    return found.lower() if found else None


PHASES = {"_noise": "noise", "_a2a": "agent2agent"}  # a config's phases as ARE's gaia2-submit names them (mini_noise)


def phase(subset: str | None) -> tuple[str | None, str | None]:
    """The config folder a --subset names and the Gaia2 phase it asks for: `mini_noise` is the `mini` config run
    in the noise phase (ARE's name for it); a plain config name is itself, with no phase asked. (A local copy that
    has a folder of that name is read as it is: datasets/load.py asks only when there is none.)"""
    for suffix, variant in PHASES.items():
        if subset is not None and subset.endswith(suffix) and len(subset) > len(suffix):
            return subset.removesuffix(suffix), variant
    return subset, None


def in_phase(dataset: Dataset, variant: str | None) -> Dataset:
    """Every Gaia2 scenario of `dataset` run in the phase `variant` (None: each in its own)."""
    if variant is None:
        return dataset
    return replace(dataset, instances=[
        i.model_copy(update={"metadata": {**i.metadata, "variant": variant}}) if i.benchmark == NAME
        else i for i in dataset.instances])


def _variant(definition: Definition, config: str | None) -> str:
    """ARE's phase: agent2agent, noise, else standard (the module docstring)."""
    configs = [c for c in (definition.config, config) if c]
    if definition.has_a2a_augmentation or any(c.endswith("_a2a") for c in configs):
        return "agent2agent"
    if definition.has_tool_augmentation or definition.has_env_events_augmentation or \
            any(c.endswith("_noise") for c in configs):
        return "noise"
    return "standard"


def _instance(scenario: Scenario, question: str, root: Path, name: str, config: str | None) -> Instance:
    definition = scenario.metadata.definition
    metadata = {"capability": _capability(definition, config),
                "variant": _variant(definition, config),
                "nb_turns": sum(e.tells_agent() for e in scenario.events),
                "oracle_actions": sum(e.class_name == "OracleEvent" for e in scenario.events),
                "scenario_file": name, "tool_families": ["gaia2"]}  # its agent gets the scenario's apps alone
    return Instance(instance_id=definition.scenario_id, question=question, answer=TARGET, root=root, files=[name],
                    image=IMAGE, metadata=metadata, benchmark=NAME)


Entry = tuple[str, str, Any, str | None]  # where, the scenario's text, its JSON, why it is not JSON


def _parquet_files(found: Path, split: str | None) -> list[Path]:
    """The parquet files of the Hub config folder `found` (of `split` when one is named)."""
    files = sorted(found.glob("*.parquet"))
    if split is None:
        return files
    chosen = [f for f in files if f.stem == split or f.stem.startswith(f"{split}-")]
    if not chosen:
        splits = sorted({f.stem.split("-")[0] for f in files})
        raise InputError(f"--split {split}: {found} has no {split}-*.parquet (its splits: {', '.join(splits)})")
    return chosen


def _rows(files: list[Path]) -> Iterator[Entry]:
    """Every Hub row of the parquet `files`, a batch at a time: its scenario is the ``data`` column."""
    import pyarrow.parquet as pq

    for file in files:
        try:
            number = 0
            for batch in pq.ParquetFile(file).iter_batches(batch_size=8, columns=sorted(HUB_COLUMNS)):
                for row in batch.to_pylist():
                    number += 1
                    where, text = f"{file.name} row {number}", row.get("data")
                    yield (where, text, *_parsed(text)) if isinstance(text, str) else \
                        (where, "", None, "no scenario (its 'data' is not a string)")
        except (OSError, ValueError) as exc:
            raise InputError(f"dataset file {file} could not be read: {exc}") from exc


def _entries(found: Path, problems: list[str], parquet: list[Path] | None) -> Iterator[Entry]:
    """Every scenario of the folder, JSONL or parquet files of `found`, read one at a time (a Gaia2 scenario is
    megabytes)."""
    if parquet is not None:
        yield from _rows(parquet)
        return
    if found.is_dir():
        for file in sorted(found.glob("*.json")):
            if (problem := entry_problem(found.resolve(), file, file.name)) is not None:
                problems.append(problem)
                continue
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(f"{file.name}: cannot be read ({exc})")
                continue
            yield file.name, text, *_parsed(text)
        return
    try:
        with open(found, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield f"line {number}", *_unwrapped(line.rstrip("\n"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"dataset file {found} could not be read: {exc}") from exc


def _written(text: str) -> Path:
    """The folder of a JSONL line's scenario file, written there once (named by its text's digest)."""
    folder = state_dir() / "gaia2" / hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
    if not (folder / WRITTEN).is_file():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(folder / WRITTEN, text)
        except OSError as exc:
            raise InputError(f"a Gaia2 scenario could not be written to {folder}: {exc}") from exc
    return folder


def load(found: Path, split: str | None = None) -> Dataset:
    """Every scenario of the folder, JSONL or Hub config folder `found`; raises InputError listing every problem."""
    own_files = found.is_dir() and any(found.glob("*.json"))  # a folder of scenario files, each sent as it is
    parquet = _parquet_files(found, split) if found.is_dir() and not own_files and _hub_rows(found) else None
    if found.is_dir() and not own_files and parquet is None:
        raise InputError(f"dataset {found} is the root of Gaia2's Hub layout: name one of its configs with --subset "
                         f"({', '.join(_configs(found))})")
    if parquet is None:
        refuse_split(split, found)
    config = found.name if parquet is not None else None
    problems: list[str] = []
    instances: list[Instance] = []
    seen: dict[str, str] = {}
    for where, text, data, error in _entries(found, problems, parquet):
        scenario, scenario_id, errors = _validated(data) if error is None else (None, None, [error])
        if scenario_id in seen:
            errors.append(f"duplicate scenario id (first at {seen[scenario_id]})")
        elif scenario_id is not None:
            seen[scenario_id] = where
        question = _question(scenario) if scenario is not None else None
        if scenario is not None and question is None:
            errors.append("no first user message (a USER event AgentUserInterface.send_message_to_agent without "
                          "dependencies, with a 'content')")
        label = f"{where} (scenario {scenario_id!r})" if scenario_id else where
        problems.extend(f"{label}: {error}" for error in errors)
        if scenario is None or question is None or errors or problems:
            continue  # once the dataset is refused, nothing more is written
        if own_files:
            instances.append(_instance(scenario, question, found.resolve(), where, config))  # the file itself
        else:
            instances.append(_instance(scenario, question, _written(text), WRITTEN, config))
    if problems:
        raise_problems(f"{found} (Gaia2 layout)", problems)
    if not instances:
        raise InputError(f"dataset {found} (Gaia2 layout) holds no scenarios")
    return Dataset(instances, dataset_fingerprint(instances))
