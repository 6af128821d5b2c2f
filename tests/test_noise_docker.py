"""`harness noise` end to end: a run of a tiny dataset with a model that answers wrong half the time, rerun twice
with the run's configuration (real sandboxes, the real `harness run` per rerun), its noise floor written and used
by `harness compare`."""

from __future__ import annotations

import json

import pytest

from harness.runner.run_config import load_run_config
from tests.fakes.flaky_model import FlakyModel
from tests.helpers.e2e import containers_of, explain, fake_config, harness

QUESTIONS = {"What is 6 times 7?": "42", "What is 9 plus 10?": "19", "What is 100 minus 1?": "99"}


@pytest.mark.docker
def test_noise_reruns_a_run_and_compare_uses_its_floor(tmp_path, image, out):
    data = tmp_path / "tasks.jsonl"
    data.write_text("".join(json.dumps({"instance_id": f"q{i}", "question": q, "answer": a}) + "\n"
                            for i, (q, a) in enumerate(QUESTIONS.items())))
    with FlakyModel(QUESTIONS, p_wrong=0.5, seed=3) as server:
        config = fake_config(tmp_path / "m.toml", server.base_url)
        proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                       "--agent", "plain", "--workers", 2, "--instance-timeout", 120)
        assert proc.returncode == 0, explain(proc)
        proc = harness("noise", out, "--reruns", 2, "--limit", 2, "--config", config)
        assert proc.returncode == 0, explain(proc)
        assert len(server.draws) == 3 + 2 * 2  # the run, then two reruns of two instances: the model live
    noise = json.loads((out / "noise.json").read_text())
    assert noise["reruns"] == 2 and noise["n"] == 2 and noise["run_size"] == 3
    assert set(noise["instances"]) == {"q0", "q1"} and len(noise["headline"]) == 3
    assert 0.0 <= noise["flip_rate"] <= 1.0 and noise["judge_churn"] == 0.0  # gaia's scorer: deterministic
    assert "verdict flip rate" in proc.stdout and "minimum detectable difference at the run's 3" in proc.stdout
    original = load_run_config(out)
    for k in (1, 2):
        rerun = load_run_config(out / "noise" / f"rerun-{k}")
        assert rerun is not None and original is not None and rerun.fingerprint() == original.fingerprint()
    assert containers_of(out) == [] and containers_of(out / "noise" / "rerun-1") == []
    proc = harness("compare", out, out / "noise" / "rerun-1", "--force")  # another selection: 2 of the 3
    assert proc.returncode == 0, explain(proc)
    assert "noise floor: the measured noise floor of" in proc.stdout
