"""Sandbox providers by name (`--sandbox NAME`): the only place that knows the implementations.

A provider is named here or given as `package.module:Class` (a SandboxProvider subclass).
Everything else gets its provider from `get_provider` and speaks the contract only.
"""

from __future__ import annotations

import functools

from harness.errors import InputError
from harness.plugins import load
from harness.sandbox.contract import SandboxHandle, SandboxProvider

DEFAULT = "docker"
PROVIDERS = {
    "docker": "harness.sandbox.docker.provider:DockerProvider",
    "swarm": "harness.sandbox.swarm.provider:SwarmProvider",
}


@functools.cache
def get_provider(name: str = DEFAULT) -> SandboxProvider:
    return provider_class(name)()


def provider_class(name: str = DEFAULT) -> type[SandboxProvider]:
    """The provider class `name` stands for (its module imported, nothing started)."""
    target = PROVIDERS.get(name, name)
    if ":" not in target:
        raise InputError(f"--sandbox {name}: not a provider ({', '.join(PROVIDERS)}) nor module:Class")
    cls = load(target, "--sandbox")
    if not (isinstance(cls, type) and issubclass(cls, SandboxProvider)):
        raise InputError(f"--sandbox {name}: {target} is not a SandboxProvider")
    return cls


def preload(name: str = DEFAULT) -> tuple[str, ...]:
    """What an agent process needs of provider `name`: its module and what its class declares
    (`SandboxProvider.preload`); the agents' fork server imports these once per run."""
    cls = provider_class(name)
    return (cls.__module__, *cls.preload)


def attach(handle: SandboxHandle):
    """The sandbox a handle names, in this process (e.g. the agent's)."""
    return get_provider(handle.provider).attach(handle)
