"""One run configuration (harness/config.py): every check between flags is a validator giving one
line that names the flags, and run.json's fingerprint of a run made before it compares equal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.config import RunConfiguration, Scoring, TomlConfig
from harness.errors import InputError
from harness.runner.run_config import RunConfig, load_run_config, save_or_check

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "datasets" / "gaia-smoke"
# run.json of `harness run --dataset datasets/gaia-smoke --model replay --agent assistant --website
# datasets/gaia-smoke/website --workers 2 --fail-on-divergence`, written before the configuration was one model.
BEFORE = REPO / "tests" / "data" / "run-json" / "gaia-smoke-before-i19.json"
# The smoke set's recording when BEFORE was written (the set has grown since: search, image, audio tasks).
BEFORE_REPLAY = BEFORE.with_name("gaia-smoke-replay-before-i23.jsonl")


def configuration(tmp_path: Path, **flags) -> RunConfiguration:
    return RunConfiguration.from_flags(**{"dataset": SMOKE, "model": "replay", "output": {"dir": tmp_path / "o"},
                                          **flags})


def refused(tmp_path: Path, **flags) -> str:
    with pytest.raises(InputError) as caught:
        configuration(tmp_path, **flags)
    message = str(caught.value)
    assert "\n" not in message and "pydantic" not in message and "errors.pydantic.dev" not in message
    return message


@pytest.mark.parametrize("flags, expect", [
    ({"epochs": {"count": 1, "reducers": ["majority"]}}, "--reducer needs --epochs K > 1"),
    ({"epochs": {"count": 2, "reducers": ["pass@3"]}}, "--reducer pass@3: needs 1 <= 3 <= --epochs (2)"),
    ({"sandbox": {"website": SMOKE / "website", "network": "internet"}}, "--website gives sandboxes the site's "
                                                                         "internal network; drop --network"),
    ({"model": "openai-compatible/m", "model_base_url": "http://127.0.0.1:9/v1",
      "replay": {"fail_on_divergence": True}}, "--fail-on-divergence needs a replay model; "
                                               "--model openai-compatible/m is not one"),
    ({"scorers": ["gaia", "llm_judge"]}, "--scorer llm_judge needs --judge-model NAME or [scorer.llm_judge] model"),
    ({"model_base_url": "http://127.0.0.1:9/v1"}, "--model-base-url and --model-key-env go with --model "
                                                  "openai-compatible/NAME, not --model replay"),
])
def test_each_check_between_flags_is_one_line_naming_them(tmp_path, flags, expect):
    assert expect in refused(tmp_path, **flags)


@pytest.mark.parametrize("flags, expect", [
    ({"limits": {"max_steps": 0}}, "--max-steps 0: "),
    ({"limits": {"instance_timeout": 0}}, "--instance-timeout 0: "),
    ({"limits": {"page_size": 10}}, "--page-size 10: "),
    ({"sandbox": {"memory": "8m"}}, "--memory 8m: a sandbox needs at least 64m"),
    ({"sandbox": {"network": "bogus"}}, "--network: network must be none, internet or internal:NAME"),
    ({"sandbox": {"warm_pool": -1}}, "--warm-pool -1: "),
    ({"execution": {"workers": 0}}, "--workers 0: "),
    ({"execution": {"max_retries": -1}}, "--max-retries -1: "),
    ({"execution": {"fail_on_error": "zero"}}, "--fail-on-error takes a count >= 1"),
    ({"epochs": {"count": 0}}, "--epochs 0: "),
    ({"selection": {"offset": -1}}, "--offset -1: "),
    ({"selection": {"stride": 0}}, "--stride 0: "),
    ({"user": {"max_replies": -1}}, "--max-user-replies -1: "),
    ({"model": "nope"}, "--model nope: no --config was given, so there is no [llm.nope] section"),
])
def test_a_bad_flag_is_named(tmp_path, flags, expect):
    assert refused(tmp_path, **flags).startswith(expect)


def test_several_problems_are_one_line(tmp_path):
    message = refused(tmp_path, limits={"max_steps": 0}, execution={"workers": 0})
    assert message.startswith("--max-steps 0: ") and "; --workers 0: " in message


def test_the_configuration_is_frozen_and_typed(tmp_path):
    cfg = configuration(tmp_path, epochs={"count": 3, "reducers": ["Majority", "pass@2"]},
                        execution={"fail_on_error": "20%"}, selection={"ids": ("a", "b")})
    assert cfg.epochs.reducers == ("majority", "pass@2") and cfg.execution.fail_on_error.threshold(10) == 2
    with pytest.raises(ValidationError, match="frozen"):
        cfg.agent = "plain"  # type: ignore[misc]
    assert configuration(tmp_path).epochs.reducers == ("mean",)


def test_score_reads_the_judge_from_the_toml(tmp_path):
    toml = tmp_path / "models.toml"
    toml.write_text('[llm.j]\nkind = "replay"\npath = "r.jsonl"\n[scorer.llm_judge]\nmodel = "j"\nrubric = "be kind"\n')
    scoring = Scoring.from_flags(["llm_judge"], None, TomlConfig(toml))
    assert scoring.judge is not None and scoring.judge.name == "j" and scoring.rubric == "be kind"
    assert Scoring.from_flags(["gaia"], None, TomlConfig(toml)).judge is None  # not asked for: not resolved


def test_a_run_json_written_before_compares_equal_on_resume(tmp_path):
    """The smoke run's run.json from before the configuration was one model: it loads, its fingerprint is
    the one it stored, and the record the same flags make now has that fingerprint (a resume runs nothing)."""
    stored = json.loads(BEFORE.read_text())
    old = load_run_config(_run_dir(tmp_path / "before"))
    assert old is not None and old.fingerprint() == stored["fingerprint"]
    cfg = configuration(tmp_path, sandbox={"website": SMOKE / "website"}, execution={"workers": 2},
                        replay={"fail_on_divergence": True}, output={"dir": tmp_path / "before"})
    model = cfg.model.model_copy(update={"path": str(BEFORE_REPLAY)})  # the recording it was made with
    new = RunConfig.of(cfg, dataset_fingerprint=stored["dataset_fingerprint"], image=stored["image"],
                       model_settings=model.public(), website=tuple(stored["environment"]["website"]),
                       prompt_template="default", run_id="resumed-000000")
    assert new.fingerprint() == stored["fingerprint"]
    assert old.selection == cfg.selection  # selected.json & co are not written again
    earlier = save_or_check(tmp_path / "before", new, force=False)  # no refusal
    assert earlier is not None and earlier.run_ids == stored["run_ids"]
    written = json.loads((tmp_path / "before" / "run.json").read_text())
    assert written.pop("run_ids") == stored.pop("run_ids") + ["resumed-000000"]
    assert written.pop("dataset") == str(SMOKE) and stored.pop("dataset") == "datasets/gaia-smoke"  # as spelled
    assert written == stored  # the same file, but for this run's id and the dataset's spelling


def test_a_changed_flag_is_refused_on_resume_naming_it(tmp_path):
    stored = json.loads(BEFORE.read_text())
    cfg = configuration(tmp_path, sandbox={"website": SMOKE / "website"}, limits={"max_steps": 3},
                        output={"dir": tmp_path / "before"})
    new = RunConfig.of(cfg, dataset_fingerprint=stored["dataset_fingerprint"], image=stored["image"],
                       model_settings=cfg.model.public(), website=tuple(stored["environment"]["website"]),
                       prompt_template="default", run_id="x")
    with pytest.raises(InputError, match=r"limits.max_steps changed \(30 -> 3\)"):
        save_or_check(_run_dir(tmp_path / "before"), new, force=False)


def _run_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    shutil.copy(BEFORE, path / "run.json")
    return path
