"""The agent contract, free of any framework."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Limits:
    max_steps: int | None = None  # model calls
    max_tokens: int | None = None  # prompt + completion, all clients of the instance
    instance_timeout: float | None = None  # wall seconds, enforced by killing the agent's process
    command_timeout: float = 120.0  # one code-environment command
    page_size: int = 8000  # characters per page of a file or web page shown to the agent


@dataclass
class AgentOutcome:
    final_message: str = ""
    messages: int = 0
    tool_calls: list[str] = field(default_factory=list)
    stop_reason: str | None = None
