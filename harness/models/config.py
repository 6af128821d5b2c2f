"""Model sections of the TOML config: `[llm.NAME]`.

    [llm.gpt4o]
    model = "gpt-4o"
    base_url = "https://api.openai.com/v1"   # any OpenAI-compatible server (vLLM, Ollama, llama.cpp)
    api_key_env = "OPENAI_API_KEY"           # the key is read from this variable, never stored
    temperature = 0.0
    price_input_per_1k = 0.0025
    price_output_per_1k = 0.01               # reasoning tokens are billed as output (harness/usage.py)
    price_cached_input_per_1k = 0.00125      # prompt-cache reads; default: the input price
    max_retries = 5                          # the client's own retries (429, 5xx, timeouts)
    timeout = 120
    max_connections = 8                      # calls in flight at once, across all agent processes
    transcription_model = "whisper-1"        # optional: offers transcribe_audio (same base_url and key)
    transcription_price_per_call = 0.006     # dollars per transcribe_audio call (a budget needs it)
    price_per_call_without_usage = 0.02      # a reply without `usage` (else such a reply stops the run, exit 2)
    [llm.gpt4o.model_info]                   # needed for names the OpenAI client does not know
    vision = false
    function_calling = true
    json_output = true
    family = "unknown"
    structured_output = false

    [llm.replay]
    kind = "replay"
    path = "datasets/gaia-smoke/replay.jsonl"  # recorded turns per instance (see models/replay.py)

`provider` says which API the section speaks (default "openai": any OpenAI-compatible server,
a LiteLLM proxy included); each goes through its official SDK (models/providers.py):

    [llm.claude]
    provider = "anthropic"                   # the Messages API; key from ANTHROPIC_API_KEY by default
    model = "claude-3-5-sonnet-20241022"
    max_tokens = 4096                        # the Messages API requires one (default DEFAULT_MAX_TOKENS)
    [llm.azure4o]
    provider = "azure"                       # key from AZURE_OPENAI_API_KEY by default
    model = "gpt-4o"
    azure_endpoint = "https://NAME.openai.azure.com"
    api_version = "2024-10-21"
    deployment = "my-gpt4o"                  # default: the model
    [llm.flash]
    provider = "gemini"                      # Google's OpenAI-compatible endpoint (base_url defaults to it)
    model = "gemini-2.0-flash"               # key from GEMINI_API_KEY by default

`transcription_model` goes to the section's own base_url and key, which only an OpenAI-compatible
provider (`openai`) serves: Anthropic has no speech-to-text API, Gemini's OpenAI-compatible endpoint
no /audio/transcriptions, and an Azure section's audio would need a deployment of its own. There a
`transcription_model` is refused at load (exit 2, naming the section) unless the section says where
the transcriptions go, with a key of their own (never the section's, which belongs to another host):

    [llm.claude]
    provider = "anthropic"
    model = "claude-3-5-sonnet-20241022"
    transcription_model = "whisper-1"
    transcription_base_url = "https://api.openai.com/v1"  # any OpenAI-compatible /audio/transcriptions
    transcription_api_key_env = "OPENAI_API_KEY"         # unset: no key sent (a local server)

`--model replay` works without a config: it plays `replay.jsonl` beside the dataset.
`--model openai-compatible/NAME --model-base-url URL` works without a config too: a section
made from the flags (`flag_section`), model NAME at URL, its key read from `--model-key-env VAR`,
else from OPENAI_API_KEY when that is set, else none (local servers ignore it).

`model_info` tells the AutoGen client what a model it does not know by name can do; three lines
(model, base_url, api_key_env) are enough for an OpenAI-compatible server: the AutoGen runner
assumes function calling and nothing else (agents/autogen/models.py, `DEFAULT_MODEL_INFO`),
and fields given here override that. Only AutoGen's fields are accepted (`MODEL_INFO_FIELDS`).
Every section is then checked by one real request before any container (models/probe.py).

`timeout` and `max_retries` are the client's own, per request. Inside an instance one
model call, its retries included, may take at most half the instance's wall-clock limit
(`call_deadline`), and no single request longer than that (`within`): a hanging or
failing model then ends as a model error while the agent's process is still alive to
say so, instead of being killed as a slow agent.

`max_connections` caps how many calls to this model are in flight at once across every
agent process of a run (models/slots.py), so many `--workers` do not trip a provider's
rate limit; a call waiting for a free slot is not a model call yet (no `model_call_started`,
not counted), but the wait is part of its deadline; 429s lower the cap in force and successes
raise it back (AIMD, models/slots.py). A 429 or 503 is retried by the Meter, not the client
(`max_retries` of them), after the server's `Retry-After` (seconds or an HTTP date, or
`retry-after-ms`) when that fits in the call's deadline, else the call fails at once
(models/pacing.py); a 429 left after the retries is a model error.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    PrivateAttr,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from harness.errors import InputError, validation_problems

if TYPE_CHECKING:
    from harness.models.slots import Slots

MODEL_SHARE = 0.5  # of an instance's wall-clock limit, the most one model call may take
# Calls in flight at once per model, across the run's agent processes. 8 lets the usual
# --workers (up to 8, one call in flight per agent at a time) run unthrottled, while a run with
# many workers stays within what hosted APIs' lower tiers and a single local server take
# without 429s or queueing; raise it for a provider that allows more.
DEFAULT_MAX_CONNECTIONS = 8
QUICK_PREFIX = "openai-compatible/"  # --model openai-compatible/NAME: a section made from flags
Provider = Literal["openai", "anthropic", "azure", "gemini"]
# The variable a provider's key is read from when the section names none (None: no key needed).
DEFAULT_KEY_ENV: dict[str, str | None] = {"openai": None, "anthropic": "ANTHROPIC_API_KEY",
                                          "azure": "AZURE_OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}
GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"
# Providers whose own endpoint answers no /audio/transcriptions, and why (a transcription_model needs
# a transcription_base_url there).
NO_TRANSCRIPTION = {"anthropic": "has no speech-to-text API",
                    "gemini": "has no /audio/transcriptions on its OpenAI-compatible endpoint",
                    "azure": "transcribes only through an Azure deployment of its own, which the harness does not call"}
DEFAULT_MAX_TOKENS = 4096  # per completion, for the Anthropic Messages API, which requires a value
# AutoGen's ModelInfo fields and their types (a typo such as `function_call` is refused, not ignored).
MODEL_INFO_FIELDS = {"vision": bool, "function_calling": bool, "json_output": bool, "family": str,
                     "structured_output": bool, "multiple_system_messages": bool}


def is_http_url(url: str) -> bool:
    """Whether `url` is an absolute http(s) URL with a host (what an HTTP client can send to)."""
    import urllib.parse

    try:
        parts = urllib.parse.urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # e.g. a bad port or an unbalanced IPv6 bracket
        return False


def _http_url(url: str) -> str:
    if not is_http_url(url):
        raise ValueError("expected http(s)://HOST[:PORT]/PATH")
    return url


HttpUrl = Annotated[str, AfterValidator(_http_url)]  # a config key naming a server


class ModelSection(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    name: str
    kind: Literal["openai", "replay"] = "openai"
    provider: Provider = "openai"
    model: str = ""
    base_url: str | None = None
    azure_endpoint: str | None = None  # azure: https://NAME.openai.azure.com
    api_version: str | None = None  # azure
    deployment: str | None = None  # azure: default, the model
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int | None = Field(None, ge=1)  # per completion
    # sent as `seed` where the provider takes one (OpenAI-compatible, Azure, Gemini; not Anthropic's Messages API)
    seed: StrictInt | None = None
    model_info: dict | None = None
    price_input_per_1k: FiniteFloat = Field(0.0, ge=0)
    price_output_per_1k: FiniteFloat = Field(0.0, ge=0)  # reasoning tokens are output tokens, priced as such
    price_cached_input_per_1k: FiniteFloat | None = Field(None, ge=0)  # prompt-cache reads; None: the input price
    price_cache_write_per_1k: FiniteFloat | None = Field(None, ge=0)  # prompt-cache writes (Anthropic); None: input
    # A call whose reply reports no token usage (None: such a reply of a priced section stops the run: usage.py)
    price_per_call_without_usage: FiniteFloat | None = Field(None, ge=0)
    max_retries: int = 5
    timeout: float = 120.0
    max_connections: StrictInt = Field(DEFAULT_MAX_CONNECTIONS, ge=1)  # calls in flight, all agent processes
    path: str | None = None  # replay: the recorded turns
    # The provider's speech-to-text model (its /v1/audio/transcriptions, at base_url with the same key):
    # set, the agents get transcribe_audio (environments/audio.py); unset, they do not.
    transcription_model: str | None = None
    # Another server for it (required for a provider without that API: NO_TRANSCRIPTION) and its key's
    # variable (None: no key is sent there).
    transcription_base_url: HttpUrl | None = None
    transcription_api_key_env: str | None = None
    # Dollars per transcribe_audio call (the meter counts it; a budget needs it with a transcription_model).
    transcription_price_per_call: FiniteFloat | None = Field(None, ge=0)
    # Where this run keeps the model's call slots (set by AgentRequest from its slots_dir; never
    # read from the config): None, no cap.
    _slots_dir: str | None = PrivateAttr(None)
    # How a message names this section: None, its [llm.NAME] in the config; else the flags it came from.
    _origin: str | None = PrivateAttr(None)

    @field_validator("model_info")
    @classmethod
    def _known_fields(cls, info: dict | None) -> dict | None:
        for key, value in (info or {}).items():
            if key not in MODEL_INFO_FIELDS:
                raise ValueError(f"unknown field {key!r} (known: {', '.join(MODEL_INFO_FIELDS)})")
            if not isinstance(value, MODEL_INFO_FIELDS[key]):
                raise ValueError(f"{key} must be a {MODEL_INFO_FIELDS[key].__name__}, not {value!r}")
        return info

    @model_validator(mode="after")
    def _provider_fields(self) -> ModelSection:
        azure = ("azure_endpoint", "api_version", "deployment")
        if self.provider == "azure":
            missing = [key for key in azure[:2] if not getattr(self, key)]
            if missing:
                raise ValueError(f"provider \"azure\" needs {' and '.join(missing)}")
        elif given := [key for key in azure if getattr(self, key) is not None]:
            raise ValueError(f"{', '.join(given)}: only for provider \"azure\", not {self.provider!r}")
        return self._transcription_fields()

    def _transcription_fields(self) -> ModelSection:
        """A transcription_model goes where it can be answered; the transcription_* keys only with one."""
        if self.transcription_model is None:
            if given := [k for k in ("transcription_base_url", "transcription_api_key_env",
                                     "transcription_price_per_call") if getattr(self, k) not in (None, "")]:
                raise ValueError(f"{', '.join(given)}: only with a transcription_model")
        elif self.kind == "openai" and self.provider in NO_TRANSCRIPTION and self.transcription_base_url is None:
            raise ValueError(f"transcription_model: provider {self.provider!r} {NO_TRANSCRIPTION[self.provider]}; "
                             "name an OpenAI-compatible speech-to-text server with transcription_base_url = \"URL\" "
                             "(and its key's variable with transcription_api_key_env), or drop transcription_model")
        elif self.transcription_api_key_env and self.transcription_base_url is None:
            raise ValueError("transcription_api_key_env: only with a transcription_base_url (else the section's "
                             "own key is sent to its own base_url)")
        return self

    def endpoint(self) -> str | None:
        """The base_url the provider's client is given: the section's, else the provider's default."""
        return self.base_url or (GEMINI_BASE_URL if self.provider == "gemini" else None)

    def transcription_endpoint(self) -> tuple[str | None, str]:
        """(base_url, key) transcribe_audio sends to: transcription_base_url with the key from
        transcription_api_key_env (none when unset), else the section's own base_url and key."""
        if self.transcription_base_url is None:
            return self.base_url, self.api_key()
        return self.transcription_base_url, _key_from(self.transcription_api_key_env, self.name)

    def key_env(self) -> str | None:
        """The variable holding the key: the section's api_key_env, else the provider's (DEFAULT_KEY_ENV)."""
        return self.api_key_env or DEFAULT_KEY_ENV[self.provider]

    def where(self, flag: str = "--model") -> str:
        """This section as messages name it: `--model NAME [llm.NAME]`, or the flags that made it."""
        return self._origin or f"{flag} {self.name} [llm.{self.name}]"

    def set_in(self, keys: str, table: str = "") -> str:
        """Where to set `keys` for this model: its [llm.NAME`table`] section; for a section made from the flags
        (`--model openai-compatible/NAME`, which has none and takes no keys), a TOML section to write."""
        if not self.name.startswith(QUICK_PREFIX):
            return f"set {keys} in [llm.{self.name}{table}]"
        return (f"--model {self.name} takes no keys: write a [llm.NAME] section in a --config TOML (model = "
                f"\"{self.model}\", base_url = \"{self.base_url}\"), set {keys} in [llm.NAME{table}], and give "
                "--model NAME")

    def public(self) -> dict:
        """Settings that define results (for the resume fingerprint); no secrets in here.

        A replay file counts by its content, not by how its path was spelled."""
        data = self.model_dump(exclude={"timeout", "max_retries", "max_connections"})
        for key in ("seed", "transcription_model", "transcription_base_url", "transcription_api_key_env",
                    "transcription_price_per_call", "price_per_call_without_usage", "price_cached_input_per_1k",
                    "price_cache_write_per_1k",
                    "azure_endpoint", "api_version", "deployment"):
            if data.get(key) is None:  # runs made before the key existed resume unchanged
                data.pop(key, None)
        if data.get("provider") == "openai":  # the default, as every run before providers existed
            data.pop("provider")
        if self.kind == "replay" and self.path:
            import hashlib

            recorded = Path(self.path)  # none: the oracle agent's section, which replays nothing
            data["path"] = ("sha256:" + hashlib.sha256(recorded.read_bytes()).hexdigest()[:16]
                            if recorded.is_file() else None)
        return data

    def priced(self) -> bool:
        """Whether the config gives this model's input and output prices (a budget needs them)."""
        return {"price_input_per_1k", "price_output_per_1k"} <= self.model_fields_set

    def transcription_priced(self) -> bool:
        """Whether transcribe_audio's calls have a price (a budget needs it): none offered, or a price given."""
        return (self.kind == "replay" or self.transcription_model is None
                or self.transcription_price_per_call is not None)

    def cost_known(self) -> bool:
        """Whether its calls' cost is a figure: a replay model's costs nothing ($0); another's needs its prices
        (else "not priced" wherever a cost is shown, never $0)."""
        return self.kind == "replay" or self.priced()

    def call_deadline(self, instance_timeout: float | None) -> float | None:
        """Seconds one call may take, the client's retries included (None: no instance limit)."""
        return None if instance_timeout is None else instance_timeout * MODEL_SHARE

    def within(self, instance_timeout: float | None) -> ModelSection:
        """This section with its per-request timeout cut to one call's deadline."""
        deadline = self.call_deadline(instance_timeout)
        if deadline is None or self.timeout <= deadline:
            return self
        return self.model_copy(update={"timeout": deadline})

    def with_slots(self, directory: str | Path | None) -> ModelSection:
        """This section with its calls capped by slots under `directory` (the run's slot directory)."""
        copy = self.model_copy()
        copy._slots_dir = None if directory is None else str(directory)
        return copy

    def slots(self) -> Slots | None:
        """The cross-process cap on this model's calls in flight (models/slots.py), or None: replay
        models and sections without a slot directory are not capped."""
        if self.kind != "openai" or not self._slots_dir:
            return None
        from harness.models.slots import Slots, slots_directory

        return Slots(slots_directory(self._slots_dir, self.name), self.max_connections)

    @property
    def vision(self) -> bool:
        """Whether the model is shown images (harness/environments/images.py): `model_info.vision` when
        the section sets it; else false, except for a replay model, which takes whatever a recording made
        with a vision model was sent (set `vision = false` in its model_info to replay a text-only one)."""
        return bool((self.model_info or {}).get("vision", self.kind == "replay"))

    def api_key(self) -> str:
        return _key_from(self.key_env(), self.name)


def _key_from(variable: str | None, name: str) -> str:
    """The key in `variable` (InputError naming model `name` when it is not set); none needed without one."""
    if not variable:
        return "not-needed"  # local OpenAI-compatible servers ignore it
    value = os.environ.get(variable)
    if not value:
        raise InputError(f"model {name}: environment variable {variable} is not set")
    return value


def load_config(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"--config {path}: no such file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"--config {path}: not valid TOML: {exc}") from None


def model_section(config: dict, name: str, *, dataset_root: Path | None = None) -> ModelSection:
    """The section `name` of `config`, checked against this machine (check_section)."""
    return check_section(parse_section(config, name, dataset_root=dataset_root))


def parse_section(config: dict, name: str, *, dataset_root: Path | None = None) -> ModelSection:
    """The section `name` of `config` (`replay` without one: replay.jsonl beside the dataset), valid
    as a section; what it needs of the machine (its replay file, its key's variable) is check_section's."""
    sections = config.get("llm", {})
    raw = sections.get(name)
    if raw is None and name == "replay":
        default = (dataset_root / "replay.jsonl") if dataset_root else None
        raw = {"kind": "replay", "path": str(default) if default else None}
    if raw is None:
        known = ", ".join(sorted(sections)) or "none"
        raise InputError(f"--model {name}: no [llm.{name}] section in the config (known: {known})")
    try:
        section = ModelSection(name=name, **raw)
    except ValidationError as exc:
        raise InputError(f"[llm.{name}] in the config: {validation_problems(exc)}") from None
    if section.kind == "openai" and not section.model:
        raise InputError(f"[llm.{name}]: 'model' is required")
    return section


def check_section(section: ModelSection) -> ModelSection:
    """A section's replay file is there and its key's variable is set: InputError now, before any container."""
    if section.kind == "replay" and (not section.path or not Path(section.path).is_file()):
        raise InputError(f"--model {section.name}: replay file {section.path!r} not found")
    if section.kind == "openai":
        section.api_key()
        if section.transcription_model is not None:
            section.transcription_endpoint()  # its key's variable too
    return section


def flag_judge(judge: str, base_url: str | None, key_env: str | None) -> ModelSection:
    """The judge's section of `--judge-model openai-compatible/NAME`: model NAME at the server of the agent's
    `--model openai-compatible/... --model-base-url URL` (and its --model-key-env), no TOML needed."""
    if not base_url:
        raise InputError(f"--judge-model {judge}: a judge named so is asked at --model-base-url's server, which "
                         f"goes with --model {QUICK_PREFIX}NAME; for another server, give --config FILE with a "
                         "[llm.NAME] section and --judge-model NAME")
    section = flag_section(judge, base_url, key_env)
    assert section is not None
    section._origin = f"--judge-model {judge} (at --model-base-url {base_url})"
    return section


def flag_section(model: str, base_url: str | None, key_env: str | None) -> ModelSection | None:
    """The section `--model openai-compatible/NAME --model-base-url URL [--model-key-env VAR]` makes;
    None when --model names a config section (then the other two flags are refused)."""
    if not model.startswith(QUICK_PREFIX):
        if base_url is not None or key_env is not None:
            raise InputError(f"--model-base-url and --model-key-env go with --model {QUICK_PREFIX}NAME, "
                             f"not --model {model}")
        return None
    name = model[len(QUICK_PREFIX):]
    if not name.strip():
        raise InputError(f"--model {model}: name the model after {QUICK_PREFIX!r}, e.g. {QUICK_PREFIX}qwen2.5-7b")
    if not base_url:
        raise InputError(f"--model {model} needs --model-base-url URL (the server's OpenAI-compatible /v1 address)")
    if not is_http_url(base_url):
        raise InputError(f"--model-base-url {base_url!r}: expected http(s)://HOST[:PORT]/PATH")
    if key_env is None and os.environ.get("OPENAI_API_KEY"):
        key_env = "OPENAI_API_KEY"
    section = ModelSection(name=model, model=name, base_url=base_url, api_key_env=key_env)
    section._origin = f"--model {model} --model-base-url {base_url}"
    if key_env and not os.environ.get(key_env):
        raise InputError(f"--model-key-env {key_env}: that environment variable is not set")
    return section
