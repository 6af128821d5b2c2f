"""Comparisons compare like with like: instances paired by id, each run's instance reduced by its
headline reducer (an --epochs run against a single run of the same answers: delta 0), one interval
function (harness/report/stats.py, within [-1, 1]), "no common instances" said, runs of another
dataset or selection not compared unless --compare. Synthetic run directories: no Docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.report import html as pages
from harness.report.compare import comparison_line
from harness.report.stats import paired_delta, wilson_interval
from tests.test_html_report import make_run_dir


def test_wilson_lives_in_stats_and_build_uses_it():
    from harness.report import build

    assert build.wilson_interval is wilson_interval
    low, high = wilson_interval(5, 10)
    assert 0.23 < low < 0.24 and 0.76 < high < 0.77
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_paired_delta_identical_runs_is_zero_with_a_real_interval():
    d = paired_delta([(1.0, 1.0)] * 8 + [(0.0, 0.0)])
    assert d.delta == 0.0 and d.base == d.other == 8 / 9
    low, high = d.ci95
    assert -1.0 <= low < 0.0 < high <= 1.0  # not the degenerate [0, 0] of a plain Wald interval
    assert high == pytest.approx(-low)


def test_paired_delta_interval_is_clipped_and_holds_the_delta():
    # every instance fixed: the old Wald interval went beyond +100%
    d = paired_delta([(0.0, 1.0)] * 9)
    assert d.delta == 1.0 and d.ci95[1] == 1.0 and -1.0 <= d.ci95[0] < 1.0
    d = paired_delta([(1.0, 0.0)] * 3)
    assert d.delta == -1.0 and d.ci95[0] == -1.0
    d = paired_delta([(0.0, 1.0)])  # one pair
    assert -1.0 <= d.ci95[0] <= d.delta <= d.ci95[1] <= 1.0
    d = paired_delta([(0.5, 1.0), (1.0, 2 / 3), (0.0, 0.0)])  # reducers' fractional values
    assert d.delta == pytest.approx((0.5 - 1 / 3) / 3)
    assert d.ci95[0] <= d.delta <= d.ci95[1]


def test_paired_delta_refuses_nothing_and_nonsense():
    with pytest.raises(ValueError):
        paired_delta([])
    with pytest.raises(ValueError):
        paired_delta([(0.0, 1.5)])


def as_epochs(src: Path, dst: Path, k: int) -> Path:
    """A copy of a single-epoch run directory as a run with --epochs k that gave the same answer
    in every epoch (rows keyed by id and epoch, run.json's epochs and reducers)."""
    make_run_dir(dst, 0)
    for name in ("selected.json", "report.json"):
        (dst / name).write_text((src / name).read_text())
    run = json.loads((src / "run.json").read_text())
    (dst / "run.json").write_text(json.dumps({**run, "epochs": k, "reducers": ["mean"]}))
    rows = [json.loads(line) for line in (src / "output.jsonl").read_text().splitlines()]
    (dst / "output.jsonl").write_text("".join(json.dumps({**r, "epoch": e}) + "\n"
                                              for r in rows for e in range(1, k + 1)))
    return dst


def test_an_epochs_run_pairs_with_a_single_run_of_the_same_answers(tmp_path):
    single = make_run_dir(tmp_path / "single", 12)
    epochs = as_epochs(single, tmp_path / "epochs", 3)
    data = pages.build_data([single, epochs], with_traces=False)
    assert data["runs"][1]["rows"][0]["instance_id"] == "task-0000 #e1"  # the page's rows stay per epoch
    (c,) = data["comparisons"]
    assert c["compared"] and c["reasons"] == []
    assert c["n"] == 12
    assert c["base_accuracy"] == c["other_accuracy"] == pytest.approx(4 / 12)
    assert c["delta"] == 0.0
    assert -1.0 <= c["delta_ci95"][0] < 0.0 < c["delta_ci95"][1] <= 1.0
    assert c["fixed"] == [] and c["broken"] == []
    # and the other way round
    (back,) = pages.build_data([epochs, single], with_traces=False)["comparisons"]
    assert back["delta"] == 0.0 and back["n"] == 12


def test_disjoint_runs_have_no_common_instances(tmp_path):
    a = make_run_dir(tmp_path / "a", 4)
    b = make_run_dir(tmp_path / "b", 4)
    for path in (b / "selected.json", b / "output.jsonl"):
        path.write_text(path.read_text().replace("task-", "other-"))
    (c,) = pages.build_data([a, b], with_traces=False, force=True)["comparisons"]
    assert c["n_common"] == 0 and c["n"] == 0 and not c["compared"] and c["delta"] is None
    assert comparison_line(c) == "b vs a: no common instances, nothing to compare"
    result = CliRunner().invoke(app, ["report", str(a), str(b), "--compare"])
    assert result.exit_code == 0, result.output
    assert "b vs a: no common instances" in result.output and "delta" not in result.output
    # without --compare: another selection, said, not compared
    result = CliRunner().invoke(app, ["report", str(a), str(b)])
    assert "b vs a: not compared: another selection (4 vs 4 instances, 0 in common)" in result.output


def other_dataset(run: Path, fingerprint: str) -> Path:
    config = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**config, "dataset_fingerprint": fingerprint}))
    return run


def test_report_of_runs_of_different_datasets_says_so_without_a_delta(tmp_path):
    a = other_dataset(make_run_dir(tmp_path / "a", 12), "aaaa")
    b = other_dataset(make_run_dir(tmp_path / "b", 12, flip=frozenset({0, 1, 2, 3})), "bbbb")
    result = CliRunner().invoke(app, ["report", str(a), str(b)])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("b vs a:"))
    assert line == ("b vs a: not compared: another dataset (dataset_fingerprint aaaa vs bbbb) "
                    "(--compare compares them anyway)")
    assert "delta" not in result.output
    # asked for: compared over the common instances, and said to be of another dataset
    result = CliRunner().invoke(app, ["report", str(a), str(b), "--compare"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("b vs a:"))
    assert "delta +0.0% [" in line and "fixed 2, broken 2" in line
    assert "compared anyway: another dataset (dataset_fingerprint aaaa vs bbbb)" in line


def test_a_smaller_selection_is_not_compared_unless_asked(tmp_path):
    full = make_run_dir(tmp_path / "full", 12)
    few = make_run_dir(tmp_path / "few", 3)  # a --limit 3 run of the same dataset
    (c,) = pages.build_data([full, few], with_traces=False)["comparisons"]
    assert not c["compared"] and c["delta"] is None
    assert c["reasons"] == ["another selection (12 vs 3 instances, 3 in common)"]
    (c,) = pages.build_data([full, few], with_traces=False, force=True)["comparisons"]
    assert c["compared"] and c["n"] == 3 and c["forced"]


def test_unfinished_instances_are_left_out_of_the_pairs(tmp_path):
    a = make_run_dir(tmp_path / "a", 12)
    b = make_run_dir(tmp_path / "b", 12)
    lines = (b / "output.jsonl").read_text().splitlines()
    (b / "output.jsonl").write_text("\n".join(lines[:-4]) + "\n")  # b has not finished its last 4 yet
    (c,) = pages.build_data([a, b], with_traces=False)["comparisons"]
    assert c["n_common"] == 12 and c["n"] == 8 and c["n_left_out"] == 4
    assert c["delta"] == 0.0  # not 4 "broken" instances
    assert "4 common instances left out" in comparison_line(c)
