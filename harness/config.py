"""One run's configuration: every `harness run` flag and the TOML's model sections, validated once.

`RunConfiguration.from_flags` reads the TOML (`--config`) once, resolves the model sections the run
calls (the agent's, the judge's) and builds one frozen model of typed sections. Every check that
needs only the flags and the TOML is a validator here, the checks between flags included, so the
CLI, `harness run`, resume and the run.json fingerprint (harness/runner/run_config.py `RunConfig.of`)
all read one object that cannot disagree with itself. What needs the world (the dataset's rows,
the replay file's turns, environment variables, importing the agent, the engine's capacity) is
checked in harness/runner/preflight.py, after the dataset is read.

Rules:
- A problem is one line naming its flag, `--memory 8m: a sandbox needs at least 64m`, every problem
  of one build joined by "; " (`problems`): an InputError, exit 2, before any container.
- A field's flag is `--` + its name with dashes (`max_steps` -> `--max-steps`) unless `FLAGS` names
  another; a check between flags names them in its own words.
- No `dict` or `Any` fields: a new flag is a typed field of its section, the CLI's option, and the
  code that reads it.

Here rather than in harness/runner/: the results layer (run.json) reads it, and no layer below the
runner may import the runner.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TypedDict, TypeVar

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, ValidationError, field_validator, model_validator

from harness.agents.contract import Limits, UserSimulation
from harness.datasets import hub
from harness.environments import mcp_config
from harness.environments.mcp_config import McpServer
from harness.environments.websearch.settings import SearchSettings, resolve
from harness.errors import InputError, validation_problems
from harness.models.config import QUICK_PREFIX, ModelSection, flag_judge, flag_section, load_config, parse_section
from harness.sandbox.contract import DEFAULT_DISK, SandboxSpec, parse_size
from harness.sandbox.registry import DEFAULT as DEFAULT_PROVIDER
from harness.scoring.reducers import parse_reducer
from harness.web.recorded import recorded_site_index, web_archives

MIN_MEMORY = "64m"  # below this the sandbox's own service and Python do not start reliably
# Fields whose flag is not `--` + the field's name, by their place in the model.
FLAGS = {("dataset", "path"): "--dataset", ("sandbox", "provider"): "--sandbox", ("output", "dir"): "--output-dir",
         ("epochs", "count"): "--epochs", ("epochs", "reducers"): "--reducer", ("scoring", "names"): "--scorer",
         ("user", "reply"): "--user-reply", ("user", "max_replies"): "--max-user-replies",
         ("user", "function"): "--user-function", ("names",): "--scorer", ("replay", "cache"): "--cache",
         ("replay", "cache_judge"): "--cache-judge"}


class Section(BaseModel):
    """A frozen, typed part of the configuration. Unknown keys are ignored (run.json of another
    version still reads; its fingerprint counts what it holds: runner/run_config.py)."""

    model_config = ConfigDict(frozen=True, protected_namespaces=())


S = TypeVar("S", bound=BaseModel)


class Resources(TypedDict):
    """The SandboxSpec fields every sandbox of a run shares (Sandbox.resources)."""

    network: str
    memory: str
    cpus: float
    disk: str


class DatasetChoice(Section):
    path: Path  # --dataset: a GAIA folder, a .jsonl/.csv file, or hf://OWNER/NAME[@REVISION]
    split: str | None = None  # --split: 2023/SPLIT/ under a GAIA root
    subset: str | None = None  # --subset: a folder of the dataset, a Hub config (Gaia2's execution, mini, ...)

    @field_validator("path")
    @classmethod
    def _hub_reference(cls, path: Path) -> Path:
        hub.parse(path)  # a malformed hf:// reference is refused here (harness/datasets/hub.py)
        return path

    @property
    def root(self) -> Path:
        """The folder the dataset lives in (its default replay.jsonl and website/ sit there)."""
        path = Path(str(self.path))  # a benchmark's NAME:PATH too (harness/benchmark.py `Benchmark.prefix`)
        if not path.exists() and ":" in path.parts[0]:
            path = Path(str(self.path).partition(":")[2])
        return path if path.is_dir() else path.parent


class Selection(Section):
    """Which instances run (harness/datasets/select.py); not fingerprinted: a resume may widen it."""

    ids: tuple[str, ...] | None = None
    skip: tuple[str, ...] | None = None
    level: tuple[int, ...] | None = None  # --level 1,2: GAIA's levels (any dataset's `level`)
    offset: int = Field(0, ge=0)
    stride: int = Field(1, ge=1)
    shuffle: bool = False
    seed: int = 0
    limit: int | None = Field(None, ge=0)


class Sandbox(Section):
    """Each instance's sandbox: the provider, its resources and network, the offline website."""

    provider: str = DEFAULT_PROVIDER  # --sandbox: docker, swarm, or module:Class
    network: str = "none"
    memory: str = "2g"
    cpus: float = 1.0
    disk: str = DEFAULT_DISK
    website: Path | None = None  # an offline site folder (harness/sandbox/site.py), on an internal network
    warm_pool: int = Field(0, ge=0)  # sandboxes kept started ahead of the instances (runner/pool.py)
    # The web proxy (sandbox/docker/webproxy.py): --web-record writes RUN_DIR/web/RUN_ID.warc.gz; --web-replay
    # serves the archives of earlier runs' web/ folders, nothing live. None when off (out of the fingerprint).
    web_record: bool | None = None
    web_replay: tuple[Path, ...] | None = None

    @field_validator("memory")
    @classmethod
    def _memory_floor(cls, memory: str) -> str:
        if 0 <= parse_size(memory) < parse_size(MIN_MEMORY):
            raise ValueError(f"a sandbox needs at least {MIN_MEMORY}")
        return memory

    @model_validator(mode="after")
    def _spec_and_website(self) -> Sandbox:
        try:  # the sandbox contract's own rules for each field (sizes, cpus, network names)
            SandboxSpec(image="-", run_id="-", instance_id="-", **self.resources())
        except ValidationError as exc:
            raise InputError(validation_problems(exc, field_prefix="--")) from None
        if self.website is not None and self.network != "none":
            raise ValueError("--website gives sandboxes the site's internal network; drop --network")
        if self.web_record and self.web_replay:
            raise ValueError("--web-record and --web-replay exclude each other")
        if self.web_record and self.website is None:
            raise ValueError("--web-record records a --website run (recording --network internet is not supported yet)")
        if self.web_replay:
            if self.website is not None or self.network != "none":
                raise ValueError("--web-replay serves the recorded web alone: drop --website and --network")
            for folder in self.web_replay:
                if not web_archives(folder):
                    raise ValueError(f"--web-replay {folder}: no recorded web (no web/*.warc.gz in it)")
        return self

    def resources(self, network: str | None = None) -> Resources:
        """The SandboxSpec fields of every sandbox of the run (`network`: the website's, once it is up)."""
        return {"network": network or self.network, "memory": self.memory, "cpus": self.cpus, "disk": self.disk}


class ErrorBudget(Section):
    """--fail-on-error: a number of errored instances, or a fraction of the selected ones."""

    text: str
    count: int | None = None
    fraction: float | None = None

    def threshold(self, selected: int) -> int:
        if self.count is not None:
            return self.count
        return max(1, math.ceil((self.fraction or 0) * selected))


def error_budget(text: str | None) -> ErrorBudget | None:
    """'5' -> five errors; '0.2' or '20%' -> a fifth of the selected instances. InputError otherwise."""
    if text is None:
        return None
    raw = text.strip()
    try:
        if raw.endswith("%") or "." in raw:
            fraction = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
            if 0 < fraction <= 1:
                return ErrorBudget(text=raw, fraction=fraction)
        elif int(raw) >= 1:
            return ErrorBudget(text=raw, count=int(raw))
    except ValueError:
        pass
    raise InputError(f"--fail-on-error takes a count >= 1 or a fraction in (0, 1] like 0.2 or 20%, not {text!r}")


class Execution(Section):
    """How the instances are run: in parallel, retried, stopped early."""

    workers: int = Field(2, ge=1)
    max_retries: int = Field(2, ge=0)  # of infrastructure failures, each on a fresh sandbox
    fail_on_error: ErrorBudget | None = None
    max_cost: FiniteFloat | None = Field(None, gt=0)  # dollars for the run (models/budget.py); not fingerprinted

    @field_validator("fail_on_error", mode="before")
    @classmethod
    def _budget(cls, value: object) -> object:
        return error_budget(value) if isinstance(value, str) else value


class Epochs(Section):
    """--epochs K runs of each instance, reduced by --reducer (the first is the headline). Not `given`: the
    dataset's default may replace the count (Gaia2's 3: runner/preflight.py `default_epochs`), saying so in
    `default` ("gaia2")."""

    count: int = Field(1, ge=1)
    reducers: tuple[str, ...] = ("mean",)
    given: bool = True  # --epochs was given (its count stands)
    default: str | None = None  # the benchmark whose default count this is, when --epochs was not given

    @model_validator(mode="before")
    @classmethod
    def _reducers(cls, data: object) -> object:
        if not isinstance(data, dict) or not isinstance(data.get("count", 1), int) or data.get("count", 1) < 1:
            return data  # the count's own error says it
        count = data.get("count", 1)
        reducers = [parse_reducer(name, count) for name in data.get("reducers") or ()] or ["mean"]
        if count == 1 and reducers != ["mean"]:
            raise ValueError("--reducer needs --epochs K > 1 (one epoch has nothing to reduce)")
        return {**data, "reducers": tuple(reducers)}


class Scoring(Section):
    """--scorer (the first decides `correct`) and the LLM judge's model: --judge-model, else the
    TOML's [scorer.llm_judge] model; its rubric from [scorer.llm_judge] rubric. Used by `score` too.
    A --judge-model given without llm_judge is the judge of the benchmarks that judge in their sandbox (Gaia2's
    soft checks, asked through the host: benchmarks/gaia2/environment.py)."""

    names: tuple[str, ...] = ("gaia",)
    given: bool = True  # --scorer was given; else the dataset's benchmark's default scorers replace `names`
    judge_model: str | None = None  # --judge-model as given (run.json lists it beside the scorers)
    judge: ModelSection | None = None  # the judge's section, when an llm_judge scorer is asked for
    rubric: str | None = None

    @model_validator(mode="after")
    def _judge(self) -> Scoring:
        if not self.names:
            raise ValueError("--scorer: at least one scorer is needed")
        if self.uses_judge() and self.judge is None:
            raise ValueError("--scorer llm_judge needs --judge-model NAME or [scorer.llm_judge] model = NAME")
        return self

    def uses_judge(self) -> bool:
        return any(name.partition(":")[0].partition("@")[0] == "llm_judge" for name in self.names)

    def recorded(self) -> list[str]:
        """The scorers as run.json lists them."""
        return list(self.names) + ([f"judge={self.judge_model}"] if self.judge_model else [])

    @classmethod
    def from_flags(cls, names: list[str] | None, judge_model: str | None, toml: TomlConfig,
                   base_url: str | None = None, key_env: str | None = None) -> Scoring:
        """`names` None: no --scorer (the benchmark's default scorers, chosen once the dataset is read:
        runner/scorers.py `judging`). `base_url`, `key_env`: --model-base-url and --model-key-env, the server a
        `--judge-model openai-compatible/NAME` is asked at (`harness run` only: `score` has no such flags)."""
        raw: dict[str, object] = {"names": tuple(names or ("gaia",)), "given": bool(names), "judge_model": judge_model,
                                  "rubric": toml.judge_rubric}
        names = names or []
        judge = judge_model or toml.judge_model
        if judge and judge_model and judge.startswith(QUICK_PREFIX):
            raw["judge"] = flag_judge(judge, base_url, key_env)
        elif judge and (judge_model or any(n.partition(":")[0].partition("@")[0] == "llm_judge" for n in names)):
            raw["judge"] = toml.section(judge, flag="--judge-model")
        return build(cls, raw)


class TomlConfig:
    """The TOML of --config, read once: its [llm.NAME] sections and [scorer.llm_judge]."""

    def __init__(self, path: Path | None):
        self.path = path
        self._data = load_config(path)
        judge = self._data.get("scorer", {}).get("llm_judge", {})
        self.judge_model: str | None = judge.get("model")
        self.judge_rubric: str | None = judge.get("rubric") or None
        self.search: object = self._data.get("search")  # [search] (environments/websearch/settings.py)
        self.mcp = mcp_config.from_toml(self._data, f"--config {path}")  # [mcp.NAME] (environments/mcp_config.py)

    def section(self, name: str, dataset_root: Path | None = None, flag: str = "--model") -> ModelSection:
        """[llm.NAME]; without a --config, an InputError saying so (and, for --model, the flags that need no TOML)."""
        if self.path is None and name != "replay":
            fix = (f", or for an OpenAI-compatible server without a TOML file: --model {QUICK_PREFIX}{name} "
                   "--model-base-url URL" if flag == "--model" else "")
            raise InputError(f"{flag} {name}: no --config was given, so there is no [llm.{name}] section; "
                             f"give --config FILE holding one{fix}")
        return parse_section(self._data, name, dataset_root=dataset_root)


class Replay(Section):
    """Recording and replaying the model's turns (harness/models/replay.py)."""

    fail_on_divergence: bool = False  # exit 5 when a replayed tool result differs from the recording
    record: Path | None = None  # append the model's turns to this replay file
    cache: Path | None = None  # --cache DIR: answer requests asked before from DIR (models/cache.py); not fingerprinted
    cache_judge: bool = False  # --cache-judge: the LLM judge's calls use the --cache too

    @model_validator(mode="after")
    def _judge_needs_cache(self) -> Replay:
        if self.cache_judge and self.cache is None:
            raise ValueError("--cache-judge needs --cache DIR")
        return self


class Output(Section):
    dir: Path
    force: bool = False  # resume even though the configuration changed
    summary_csv: Path | None = None  # default: DIR/../summary.csv


class RunConfiguration(Section):
    """Everything `harness run` was asked to do."""

    dataset: DatasetChoice
    selection: Selection = Selection()
    agent: str = "assistant"
    model: ModelSection  # --model: the agent's section ([llm.NAME], replay, or openai-compatible/NAME)
    model_flag: str  # --model as given
    limits: Limits = Limits(max_steps=30, instance_timeout=600.0)
    sandbox: Sandbox = Sandbox()
    execution: Execution = Execution()
    scoring: Scoring = Scoring()
    user: UserSimulation = UserSimulation()
    epochs: Epochs = Epochs()
    replay: Replay = Replay()
    prompt_template: Path | None = None  # --prompt-template FILE (runner/prompt.py); None: the default
    output: Output
    # --search, --search-block, --no-search-cache and [search] (environments/websearch/settings.py: resolve)
    search: SearchSettings = SearchSettings()
    mcp: tuple[McpServer, ...] = ()  # --mcp NAME=COMMAND and [mcp.NAME] (environments/mcp_config.py)

    @model_validator(mode="after")
    def _replay_model(self) -> RunConfiguration:
        if self.replay.fail_on_divergence and self.model.kind != "replay":
            raise ValueError(f"--fail-on-divergence needs a replay model; --model {self.model_flag} is not one")
        return self

    @model_validator(mode="after")
    def _priced(self) -> RunConfiguration:
        """A budget in dollars needs the price of every model the run calls (the judge's too)."""
        flags = [flag for flag, value in (("--max-cost", self.execution.max_cost),
                                          ("--max-instance-cost", self.limits.max_instance_cost)) if value is not None]
        models = [(self.model, "--model")] + ([(self.scoring.judge, "--judge-model")] if self.scoring.judge else [])
        for section, flag in models:
            if flags and not section.priced():
                raise ValueError(f"{' and '.join(flags)} need the price of every model the run calls: {flag} "
                                 f"{section.name} has no price_input_per_1k and price_output_per_1k: "
                                 f"{section.set_in('both')}")
        if flags and not self.model.transcription_priced():
            raise ValueError(f"{' and '.join(flags)} need the price of every paid call the run makes: --model "
                             f"{self.model.name} offers transcribe_audio ({self.model.transcription_model}) with no "
                             f"transcription_price_per_call: {self.model.set_in('transcription_price_per_call')}")
        if flags and self.search.paid and self.search.price_per_search is None:
            raise ValueError(f"{' and '.join(flags)} need the price of every paid call the run makes: --search "
                             f"{self.search.provider} has no price_per_search in [search.{self.search.provider}]")
        return self

    @classmethod
    def from_flags(cls, *, dataset: Path, split: str | None = None, subset: str | None = None, model: str,
                   model_base_url: str | None = None,
                   model_key_env: str | None = None, config: Path | None = None, scorers: list[str] | None = None,
                   judge_model: str | None = None, search: str | None = None,
                   search_block: list[str] | None = None, no_search_cache: bool = False,
                   mcp: list[str] | None = None, **sections: object) -> RunConfiguration:
        """The configuration of these flags (keyword `sections`: each section's fields, e.g.
        limits={"max_steps": 30}); InputError naming the flag when any is wrong."""
        toml = TomlConfig(config)
        root = DatasetChoice(path=dataset).root
        agent_section = flag_section(model, model_base_url, model_key_env) or toml.section(model, root)
        raw = {"dataset": {"path": dataset, "split": split, "subset": subset},
               "model": agent_section, "model_flag": model,
               "scoring": Scoring.from_flags(scorers, judge_model, toml, model_base_url, model_key_env),
               **sections}
        sandbox = sections.get("sandbox")
        website = isinstance(sandbox, dict) and sandbox.get("website") is not None
        # a replay of a recorded --website run searches its recorded index, as that run searched the site
        website = website or isinstance(sandbox, dict) and any(
            recorded_site_index(folder) is not None for folder in sandbox.get("web_replay") or ())
        found = resolve(search, search_block, no_search_cache, toml.search, website)
        replaying = isinstance(sandbox, dict) and sandbox.get("web_replay")  # never calls the provider: no key
        raw["search"] = found.model_copy(update={"api_key_env": None}) if replaying else found
        raw["mcp"] = mcp_config.combine(mcp or [], toml.mcp)
        return build(cls, raw)


def build(model: type[S], raw: dict) -> S:
    """`model` validated from `raw`; its problems as one InputError line naming the flags."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise InputError(problems(exc, model)) from None


def problems(exc: ValidationError, model: type[BaseModel]) -> str:
    """Each problem as `--flag VALUE: what is wrong` (a check between flags: its own words), joined by "; "."""
    out = []
    for error in exc.errors():
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        flag = flag_of(model, tuple(str(x) for x in error.get("loc", ())))
        given = error.get("input")
        if flag is None:
            out.append(message)
        elif error.get("type") == "missing" or isinstance(given, (dict, list, tuple, BaseModel)) or given is None:
            out.append(f"{flag}: {message}")
        else:
            out.append(f"{flag} {given}: {message}")
    return "; ".join(out) or str(exc).splitlines()[0]


def flag_of(model: type[BaseModel], loc: tuple[str, ...]) -> str | None:
    """The flag of the field at `loc` in `model`; None when `loc` names a section (or nothing)."""
    fields = model.model_fields
    for i, name in enumerate(loc):
        field = fields.get(name)
        if field is None:
            return None
        inner = field.annotation
        sub = next((t for t in getattr(inner, "__args__", (inner,)) if isinstance(t, type)
                    and issubclass(t, BaseModel)), None)
        if sub is None or i == len(loc) - 1:
            if sub is not None and sub is not ErrorBudget and not issubclass(sub, ModelSection):
                return None  # a whole section: its validator names the flags itself
            return FLAGS.get(loc[: i + 1], "--" + name.replace("_", "-"))
        fields = sub.model_fields
    return None

