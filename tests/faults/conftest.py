"""Fixtures of the fault suite (tests/faults/reliability.py keeps the figures)."""

from __future__ import annotations

import pytest

from tests.faults.reliability import RELIABILITY, Reliability


@pytest.fixture
def reliability() -> Reliability:
    return RELIABILITY
