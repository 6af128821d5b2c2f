"""A provider's capabilities (sandbox/contract.py `Capabilities`) are checked before a run writes anything:
a flag asking for what the provider does not offer is exit 2 with no run directory made."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import exit_codes
from tests.helpers.e2e import SUM, explain, harness, one_instance

SITE = Path(__file__).parent.parent / "datasets" / "gaia-smoke" / "website"


@pytest.mark.parametrize("provider, flags, refused", [
    ("NoWebProxyProvider", ["--web-record"], "--web-record/--web-replay: the sandbox provider "
                                              "tests.helpers.providers:NoWebProxyProvider cannot run a web proxy"),
    ("NoImagesProvider", [], "--website: the sandbox provider tests.helpers.providers:NoImagesProvider cannot "
                             "serve an offline site"),
])
def test_a_flag_the_provider_cannot_serve_is_refused_before_anything_is_written(tmp_path, provider, flags, refused):
    data, config = one_instance(tmp_path, SUM)
    out = tmp_path / "out"
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--sandbox", f"tests.helpers.providers:{provider}", "--website", SITE, *flags)
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    assert refused in proc.stderr, explain(proc)
    assert not (out / "run.json").exists() and not out.exists()
