"""A plug-in sandbox provider (`--sandbox tests.helpers.providers:NoImagesProvider`) that has no
images of its own: it keeps the contract's image operations as they are."""

from __future__ import annotations

from harness.sandbox.contract import Leftover, SandboxProvider


class NoImagesProvider(SandboxProvider):
    """Implements only what the contract requires; none of it is reached by `harness images`."""

    def preflight(self, *, network="none", log=print):
        raise NotImplementedError

    def start(self, spec):
        raise NotImplementedError

    def attach(self, handle):
        raise NotImplementedError

    def teardown(self, sandbox) -> None:
        raise NotImplementedError

    def find(self, run_id=None) -> list[Leftover]:
        return []

    def cleanup(self, *, run_id=None, everything=False, dry_run=False) -> list[Leftover]:
        return []
