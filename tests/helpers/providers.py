"""Plug-in sandbox providers (`--sandbox tests.helpers.providers:NAME`) offering less than docker's:
`NoImagesProvider` keeps the contract's optional operations as they are (no capability), and
`NoWebProxyProvider` serves a website but has no web proxy."""

from __future__ import annotations

from contextlib import contextmanager

from harness.sandbox.contract import Capabilities, Leftover, SandboxProvider


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


class NoWebProxyProvider(NoImagesProvider):
    """Passes the engine's preflight and serves --website (a network that is only a name), no web proxy:
    a --web-record run on it must be refused before it writes anything."""

    capabilities = Capabilities(website=True)

    def preflight(self, *, network="none", log=print):
        return "no-such-image:test"

    @contextmanager
    def website(self, site_dir, image, run_id):
        yield "internal:no-such-site"
