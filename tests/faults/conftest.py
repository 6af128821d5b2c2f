"""Fixtures of the fault suite (tests/faults/reliability.py keeps the figures)."""

from __future__ import annotations

import pytest

from tests.faults.reliability import RELIABILITY, Reliability


@pytest.fixture
def reliability() -> Reliability:
    return RELIABILITY


@pytest.fixture(scope="module")
def proxy_image(image) -> str:
    """The --web-record/--web-replay proxy's image, built before any run's deadline starts."""
    from harness.sandbox.docker import webproxy

    return webproxy.build(lambda message: None)
