"""Environments without a sandbox, to build an agent before any container exists.

The preflight (`AgentRunner.preflight`) builds the run's agent once over these: a factory that
cannot build an agent, or builds one its model cannot serve, is then an input error before any
sandbox starts. Tools can be made over them; any use of the sandbox (its methods, or a provider's own
attribute such as a Docker sandbox's `id`) raises `SandboxNeeded`, which says only that the agent
needs a live sandbox to be built: such an agent is not checked this way, and that is not a failure.
A factory is therefore called once more than there are instances, first in the harness's own
process: one with side effects should make them after it has touched its sandbox.

The dry environments are built by the tool families as an agent process builds them
(harness/environments/family.py), so they offer every tool the run's agents will be offered that can be
known before a sandbox: the code, file, browser and media tools, `view_image` and `transcribe_audio` as
the model section says, and `web_search` when the run has a search provider (its schema only: the
preflight searches nothing). The MCP servers' tools are not among them: they are listed only once a server
runs (a `command` one inside the instance's sandbox), so the preflight's first request goes without
their schemas.
"""

from __future__ import annotations

from harness.agents.contract import Limits
from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.families import environments
from harness.environments.family import Setup
from harness.environments.websearch.settings import SearchSettings
from harness.models.config import ModelSection
from harness.sandbox.contract import Sandbox
from harness.traces import Tracer


class SandboxNeeded(Exception):
    """The agent used its sandbox while it was being built (dry: there is none)."""


class DrySandbox(Sandbox):
    name = "dry"

    def _none(self, *args, **kwargs):
        raise SandboxNeeded("a dry construction has no sandbox")

    exec = copy_in = read_file = connection = handle = start_browser = _none

    def __getattr__(self, name: str):
        """A provider's own attribute (e.g. a Docker sandbox's `id`): there is none either."""
        if name.startswith("__"):
            raise AttributeError(name)
        raise SandboxNeeded(f"a dry construction has no sandbox (asked for its {name!r})")


def dry_environments(limits: Limits, model: ModelSection | None = None, search: SearchSettings | None = None,
                     instance: Instance | None = None) -> Environments:
    """Environments like an agent process's (each tool family's that is offered to the model section and
    the run's search settings, when given) over a DrySandbox, tracing nothing."""
    return environments(Setup(DrySandbox(), Tracer(None), command_timeout=limits.command_timeout,
                              page_size=limits.page_size, model=model, instance=instance, search=search))
