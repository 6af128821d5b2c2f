"""The sandbox contract: what the rest of the harness may ask of a sandbox.

Lifecycle (create/start/teardown) lives with each provider; this contract is
only what an open sandbox does: run commands, move files, report its address.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from pydantic import BaseModel, Field, field_validator

WORKSPACE = "/workspace"
DEFAULT_MAX_OUTPUT = 1024 * 1024  # bytes kept per stream; the rest is counted, not kept


class SandboxSpec(BaseModel):
    """Everything needed to start one sandbox (typed, validated before any container)."""

    image: str
    run_id: str
    instance_id: str
    attempt: int = 1
    # Resource limits: safe defaults, overridable per run.
    memory: str = "2g"
    cpus: float = 1.0
    pids: int = 1024  # Chromium alone runs ~200 threads
    # "none" (default), "internet", or "internal:NAME" (only that internal network).
    network: str = "none"
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        from docker.utils import parse_bytes

        try:
            if parse_bytes(value) < 6 * 1024 * 1024:
                raise ValueError
        except Exception:  # noqa: BLE001 - docker raises its own error type
            raise ValueError(f"memory must be a size like 512m or 2g (at least 6m), not {value!r}") from None
        return value

    @field_validator("cpus")
    @classmethod
    def _cpus(cls, value: float) -> float:
        if value <= 0:
            raise ValueError(f"cpus must be > 0, not {value}")
        return value

    @field_validator("pids")
    @classmethod
    def _pids(cls, value: int) -> int:
        if value < 16:
            raise ValueError(f"pids must be >= 16, not {value}")
        return value

    @field_validator("network")
    @classmethod
    def _network(cls, value: str) -> str:
        if value in ("none", "internet") or re.fullmatch(r"internal:[A-Za-z0-9][A-Za-z0-9_.-]*", value):
            return value
        raise ValueError(f"network must be none, internet or internal:NAME, not {value!r}")


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Sandbox(abc.ABC):
    """An open sandbox. Raises SandboxDied (an InfraError) when it is gone."""

    name: str

    @abc.abstractmethod
    def exec(self, argv: Sequence[str], *, timeout: float = 60, stdin: str | None = None,
             cwd: str = WORKSPACE, env: Mapping[str, str] | None = None,
             max_output: int = DEFAULT_MAX_OUTPUT) -> ExecResult:
        """Run argv; on timeout the whole process tree is killed and timed_out is set."""

    def shell(self, command: str, **kwargs) -> ExecResult:
        return self.exec(["bash", "-c", command], **kwargs)

    def python(self, code: str, **kwargs) -> ExecResult:
        """Run Python code (the sandbox's toolbox interpreter), passed on stdin."""
        return self.exec(["python3", "-"], stdin=code, **kwargs)

    @abc.abstractmethod
    def copy_in(self, root: Path, names: Sequence[str], dest: str = WORKSPACE) -> list[str]:
        """Copy root/NAME for each name into dest/NAME, in one archive."""

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes:
        """The bytes of a file inside the sandbox."""

    @property
    @abc.abstractmethod
    def endpoint(self) -> tuple[str, int]:
        """(host, port) at which the sandbox's service answers."""
