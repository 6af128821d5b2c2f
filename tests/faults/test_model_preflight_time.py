"""The model preflight honours each section's `timeout` (issue 29 item 10): it capped every probe at
30 s whatever the section said, so a CPU model whose first call (1.6k tokens of tool schemas) takes
48-50 s failed a run with `timeout = 120` as exit 2 `no answer within 30 s (preflight)`.

The model is the scripted server (tests/fakes/openai_server.py) answering the probe after
`probe_delay` seconds. The old cap (`PROBE_TIMEOUT`, 30 s) is lowered to 1 s here so that a 3 s probe
against `timeout = 10` shows which one rules without a 30 s wait: the section's (the real runners'
first calls, AutoGen's and the plain one's, and the plain chat completion of the judge).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.helpers.e2e import FAKE_KEY, FAKE_KEY_ENV

DELAY, TIMEOUT = 3.0, 10.0


@pytest.mark.parametrize("caller", ["assistant", "plain", "judge"])
def test_a_probe_slower_than_30s_cap_but_within_the_sections_timeout_passes(monkeypatch, reliability, caller):
    from harness.agents.contract import Limits
    from harness.agents.registry import load_runner
    from harness.datasets.model import Instance
    from harness.models import probe
    from harness.models.config import ModelSection
    from harness.settings import settings

    monkeypatch.setattr(probe, "PROBE_TIMEOUT", 1.0, raising=False)  # the old hard cap, shortened
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)
    monkeypatch.delenv("HARNESS_PREFLIGHT_TIMEOUT", raising=False)
    settings.cache_clear()
    with FakeOpenAI([], probe_delay=DELAY) as server:
        section = ModelSection(name="fake", model="fake-model-1", base_url=server.base_url, api_key_env=FAKE_KEY_ENV,
                               timeout=TIMEOUT, max_retries=0, model_info={"function_calling": True})
        request = None
        if caller != "judge":
            runner_cls, target = load_runner(caller)
            instance = Instance(instance_id="slow", question="What is 6*7?", answer="42", root=Path("/nonexistent"))
            request = runner_cls.preflight(target, probe.probe_section(section), instance, Limits())
        t0 = time.monotonic()
        warnings = probe.probe_all([probe.ModelCheck("--model fake", section, request)])
        seconds = time.monotonic() - t0
        probes = len(server.probes)
    settings.cache_clear()
    reliability.record(f"model preflight answered after {DELAY:g} s, timeout = {TIMEOUT:g} ({caller})",
                       f"passed in {seconds:.1f} s, {probes} probe (the section's timeout, not a hard cap)",
                       seconds=seconds)
    assert warnings == [] and probes == 1, (warnings, server.probes)
    assert DELAY <= seconds < TIMEOUT + 5, seconds


def test_the_whole_preflights_default_deadline_covers_every_sections_timeout(monkeypatch):
    """Without HARNESS_PREFLIGHT_TIMEOUT the deadline is the probed sections' timeouts added up, plus
    slack, at least 60 s (before: 60 s whatever they said, below one 120 s call)."""
    from harness.models.config import ModelSection
    from harness.models.probe import default_deadline

    sections = [ModelSection(name=n, model="m", base_url="http://127.0.0.1:9/v1", timeout=t)
                for n, t in (("a", 120), ("b", 45))]
    assert default_deadline(sections) == 120 + 45 + 30
    assert default_deadline(sections[1:]) == 75
    assert default_deadline([sections[1].model_copy(update={"timeout": 5})]) == 60
