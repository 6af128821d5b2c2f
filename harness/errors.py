"""One error taxonomy for the whole pipeline.

Each error is raised where it happens and carries its kind, so retries and
reports can tell them apart without parsing messages:

- input:  the user's dataset, flags or config are wrong (CLI exit code 2, before any container)
- infra:  the engine, an image or a sandbox failed; retried on a fresh sandbox
- agent:  the agent under test crashed or misbehaved; recorded, not retried by default
- model:  the model provider failed (after the client's own retries); recorded
- scorer: a scorer could not reach a verdict
"""

from __future__ import annotations

from typing import ClassVar


class HarnessError(Exception):
    kind: ClassVar[str] = "harness"
    retryable: ClassVar[bool] = False


class InputError(HarnessError):
    kind = "input"


class InfraError(HarnessError):
    kind = "infra"
    retryable = True


class SandboxDied(InfraError):
    """The sandbox container is gone or its service stopped answering."""


class EngineUnavailable(InfraError):
    """No Docker engine answers."""


class AgentError(HarnessError):
    kind = "agent"


class ModelError(HarnessError):
    kind = "model"


class ScorerError(HarnessError):
    kind = "scorer"
