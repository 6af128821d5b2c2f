"""Every `HARNESS_*` environment variable the harness reads, in one typed object.

Read once per process on first use (`settings()`), never at import, so a test or a
caller can set variables before the first sandbox starts (`settings.cache_clear()`
re-reads them). The table of variables in docs/reference.md is checked against this class by
tests/test_settings.py: add a field here and a row there.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from harness.errors import InputError


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HARNESS_", extra="ignore", frozen=True)

    # --- where state lives
    state_dir: Path | None = Field(None, description="lock files and the port registry (default ~/.cache/harness)")

    # --- the Docker engine (harness/sandbox/docker/engine.py)
    docker_host: str | None = Field(None, description="engine URL: unix://, tcp:// (TLS with docker_cert_path) or "
                                                      "ssh://user@host (default: DOCKER_HOST, else the local socket); "
                                                      "also `--docker-host`")
    docker_cert_path: Path | None = Field(None, description="directory with ca.pem, cert.pem, key.pem: TLS client "
                                                            "certificates for a tcp:// engine (default: "
                                                            "DOCKER_CERT_PATH when DOCKER_TLS_VERIFY is set)")
    docker_timeout: float = Field(120, gt=0, description="seconds for one engine API call")
    docker_max_starts: int = Field(4, ge=1, description="parallel create+start calls (more only queue in the engine)")
    docker_retries: int = Field(3, ge=0, description="retries of transient engine errors (5xx, dropped connections)")
    docker_backoff: float = Field(0.5, ge=0, description="first backoff in seconds between those retries (doubles)")
    docker_pool: int = Field(64, ge=1, description="HTTP connections of the one engine client all threads share")

    # --- sandboxes (harness/sandbox/docker/)
    sandbox_ready_timeout: float = Field(60, gt=0, description="seconds for sandboxd to answer after start")
    browser_start_timeout: float = Field(90, gt=0, le=600, description="seconds for Chromium in a sandbox to answer "
                                                                      "after its start (a loaded host needs more)")
    swarm_task_timeout: float = Field(300, gt=0, description="swarm provider: seconds for a sandbox's task to be "
                                                             "running (waiting for a node with room counts), and for "
                                                             "preflight's check of every node")
    sandbox_transport: Literal["auto", "tcp", "unix"] = Field(
        "auto", description="how the docker provider reaches sandboxd: unix (a socket in a directory mounted "
                            "into a sandbox with no network at all; network policy none on a local Linux engine "
                            "only), tcp (a published port), auto (unix where it can, else tcp)")
    sandbox_host: str | None = Field(None, description="address of published ports (default: DOCKER_HOST's host, "
                                                        "else 127.0.0.1)")
    port_range: str | None = Field(None, description="LOW-HIGH: publish sandbox ports only in this range "
                                                     "(remote hosts behind a firewall)")
    port_bind: str | None = Field(None, description="host address ports are bound to (default 127.0.0.1 "
                                                    "for a local engine, 0.0.0.0 for a remote one)")
    port_lock_timeout: float = Field(120, gt=0, description="seconds to wait for the port-range lock")
    port_wait: float = Field(3600, gt=0, description="seconds a sandbox start waits for a port of "
                                                     "HARNESS_PORT_RANGE to free up (a range smaller than the "
                                                     "concurrency makes workers take turns)")

    # --- images (harness/sandbox/docker/images.py)
    base_image: str = Field("debian:bookworm-slim", description="base used when present or pullable; "
                                                                "otherwise built from Debian packages")
    pull_timeout: float = Field(60, gt=0, description="seconds before an unreachable registry gives up")
    no_pull: bool = Field(False, description="1: never try to pull the base image")
    build_ca_bundle: str | None = Field(None, description="extra CA for package installs during builds "
                                                          "(also PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE; "
                                                          "never left in the image)")
    images_dir: Path | None = Field(None, description="image build contexts to use instead of the "
                                                      "top-level images/ (shipped as harness/images/)")

    # --- the run (harness/runner/, harness/environments/)
    agent_fork: bool = Field(True, description="1: fork agent processes from a preloaded server "
                                               "(harness/runner/agent_process/forkserver.py); 0: start each fresh")
    retry_backoff: float = Field(2.0, ge=0, description="seconds between infra retries (times the attempt)")
    browser_action_timeout: float = Field(20, gt=0, description="seconds for one browser action")
    web_upstream_ca: str | None = Field(None, description="extra CA (PEM file) the --web-record proxy trusts "
                                                          "for the sites it records (a site's own certificate)")
    progress_every: float = Field(30, gt=0, description="without a terminal (nohup, CI, Slurm): seconds between "
                                                        "plain progress lines (one also every 10% of the instances)")

    # --- model servers (harness/models/)
    model_max_reply_mib: float = Field(16, gt=0, description="MiB one model reply may have (decoded); a longer "
                                                             "one is a model error")
    preflight_timeout: float | None = Field(None, gt=0, description="seconds the model preflight may take in all "
                                            "(every section's request, retries included; default: the probed "
                                            "sections' timeouts added up, plus 30, at least 60); beyond: exit 2")
    max_tool_calls_per_reply: int = Field(32, ge=1, description="tool calls of one model reply that run; the rest "
                                                                "are dropped (a `tool_calls_dropped` trace event)")

    @field_validator("port_range")
    @classmethod
    def _range(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            low, high = (int(x) for x in value.split("-"))
        except ValueError:
            raise ValueError(f"{value!r}: expected LOW-HIGH, e.g. 20000-20999") from None
        if not 1 <= low <= high <= 65535:
            raise ValueError(f"{value!r}: need 1 <= LOW <= HIGH <= 65535")
        return value.strip()

    def ports(self) -> range | None:
        if self.port_range is None:
            return None
        low, high = (int(x) for x in self.port_range.split("-"))
        return range(low, high + 1)


# Variables read by other programs than the harness process, documented in the same table.
ELSEWHERE = {
    "HARNESS_SANDBOX_TOKEN": "inside the sandbox: sandboxd's per-sandbox token (set by the provider)",
    "HARNESS_SANDBOX_PORT": "inside the sandbox: sandboxd's port (8765)",
    "HARNESS_SANDBOX_HANDOFF": "inside the sandbox: the harness's Unix socket, in a read-only directory, that hands "
                               "sandboxd the socket it serves instead of its port (set by the docker provider's "
                               "socket transport)",
    "HARNESS_CHROMIUM": "inside the sandbox: the Chromium binary sandboxd starts",
    "HARNESS_BROWSER_FLAGS": "inside the sandbox: Chromium flags a --web-record/--web-replay run adds (its proxy, "
                             "its CA's key hash; set by the provider)",
    "HARNESS_WEB_PROXY": "inside the sandbox: the web proxy's address a --web-record/--web-replay run's tools fetch "
                         "through (set by the provider)",
    "HARNESS_WEB_CA": "inside the sandbox: the certificate of a --web-record/--web-replay run's CA, which the tools' "
                      "fetches trust (set by the provider; never its key)",
    "HARNESS_WEB_MODE": "inside the web proxy's container: record or replay (set by the provider)",
    "HARNESS_TASK_FILE": "inside the sandbox: an --agent sandbox:COMMAND program's task file (set by its runner)",
    "HARNESS_ANSWER_FILE": "inside the sandbox: where an --agent sandbox:COMMAND program may write its answer",
    "HARNESS_MODEL": "inside the sandbox: the model an --agent sandbox:COMMAND program is to name",
    "HARNESS_MCP_URL": "inside the sandbox: the instance's tools as an MCP server (streamable HTTP) for an --agent "
                       "sandbox:COMMAND program (set by its relay)",
    "HARNESS_COMMAND_TAG": "inside the sandbox: set by sandboxd in each command's environment; on timeout it also "
                           "kills every process carrying the command's value",
    "HARNESS_DOCKERD_WAIT": "scripts/ensure-docker.sh: seconds to wait for a dockerd it started",
    "HARNESS_DOCKERD_LOG": "scripts/ensure-docker.sh: log file of a dockerd it started",
    "HARNESS_DEBIAN_MIRROR": "images/base/build.sh: Debian mirror for the offline base "
                             "(default: the one apt already uses)",
    "HARNESS_DEBIAN_SUITE": "images/base/build.sh: Debian suite of the offline base (bookworm)",
    "HARNESS_TEST_WORKERS": "scripts/test.sh: pytest-xdist workers of the suite (4; 2 with --fast)",
    "HARNESS_BENCH_ARE_VENV": "bench/'s ARE script: the host virtual environment with ARE it builds once and reuses "
                              "(default ~/.cache/harness-bench/are-venv)",
}


@functools.lru_cache(maxsize=1)
def settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(f"HARNESS_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors())
        raise InputError(f"bad environment setting: {problems}") from None


def use(**values: str) -> None:
    """Set HARNESS_* values for this process and the processes it starts (e.g. --docker-host for the
    agent processes, which inherit the environment), then re-read the settings."""
    import os

    for key, value in values.items():
        os.environ[f"HARNESS_{key.upper()}"] = value
    settings.cache_clear()
    settings()  # a bad value fails here, naming the variable


def state_dir() -> Path:
    """HARNESS_STATE_DIR, else ~/.cache/harness; created on first use."""
    path = settings().state_dir or Path.home() / ".cache" / "harness"
    path.mkdir(parents=True, exist_ok=True)
    return path
