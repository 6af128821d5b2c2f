"""MATH-500 end to end: the sample set, replayed agents running Python in real sandboxes, the math scorer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.e2e import REPO, explain, harness, rows, trace

pytestmark = pytest.mark.docker
SAMPLE = REPO / "datasets" / "math500-sample"

# Hand-computed verdicts of the replayed answers (scripts/make_math500_sample.py): target vs answer.
EXPECTED = {
    "test/prealgebra/1.json": True,     # \frac{1}{2} vs 0.5
    "test/prealgebra/2.json": True,     # 5 vs "The sum is $\boxed{5}$." (final message, no <solution>)
    "test/prealgebra/3.json": True,     # \frac{3}{4} vs 0.75
    "test/prealgebra/4.json": True,     # 25\% vs 0.25
    "test/prealgebra/5.json": True,     # 40\% vs 40
    "test/geometry/6.json": True,       # 12\text{ cm} vs 12
    "test/geometry/7.json": True,       # 10 vs 10 \text{ meters}
    "test/algebra/8.json": False,       # [2,5) vs [2,5]
    "test/algebra/9.json": True,        # (-\infty,3] vs (-\infty, 3]
    "test/algebra/10.json": True,       # \{1,2\} vs \{2, 1\}
    "test/algebra/11.json": True,       # -2, 3 vs 3, -2
    "test/algebra/12.json": True,       # (x+1)^2 vs x^2+2x+1
    "test/algebra/13.json": True,       # x^2-1 vs (x+1)(x-1)
    "test/number_theory/14.json": False,  # 3 vs 4
    "test/algebra/15.json": True,       # 2\sqrt{3} vs \sqrt{12}
    "test/geometry/16.json": True,      # 30^\circ vs 30
    "test/prealgebra/17.json": True,    # \$18.50 vs 18.5
    "test/algebra/18.json": True,       # (2,-1) vs (2, -1)
    "test/counting_and_probability/19.json": False,  # \frac{1}{3} vs 0.33
    "test/geometry/20.json": True,      # 4\pi vs "The area is $\boxed{4\pi}$."
    "test/precalculus/21.json": True,   # pmatrix 2,3 vs pmatrix written without spaces
    "test/precalculus/22.json": True,   # \text{(C)} vs C
    "test/algebra/23.json": True,       # 3 vs x = 3
    "test/number_theory/24.json": True,  # 8 vs "... \boxed{4}, but ... \boxed{8}" (the last box)
    "test/algebra/25.json": True,       # \frac{7}{2} vs "The answer is 7/2"
    "test/algebra/26.json": False,      # (x+1)^2 vs (x+2)^2
    "test/intermediate_algebra/27.json": False,  # 55 vs "I could not finish this one."
}


def test_math500_sample_scores_every_instance_as_computed_by_hand(out: Path):
    proc = harness("run", "--dataset", SAMPLE, "--model", "replay", "--scorer", "math", "--scorer", "gaia",
                   "--output-dir", out, "--workers", 2, timeout=900)
    assert proc.returncode == 0, explain(proc)
    got = {r["instance_id"]: r for r in rows(out)}
    assert set(got) == set(EXPECTED)
    verdicts = {i: r["scores"]["math"]["correct"] for i, r in got.items()}
    assert verdicts == EXPECTED
    assert all(r["correct"] == EXPECTED[i] for i, r in got.items())  # math is the first scorer
    # GAIA's string rules miss the equivalent forms the math scorer accepts (0.5 for \frac{1}{2}).
    assert got["test/prealgebra/1.json"]["scores"]["gaia"]["correct"] is False
    assert got["test/prealgebra/2.json"]["answer_source"] == "final_message"
    assert got["test/prealgebra/2.json"]["level"] == 1  # "Level 1" in the file
    for row in got.values():  # every agent really ran its Python in the sandbox
        runs = [e for e in trace(out, row) if e["type"] == "env" and e["action"] == "run_python"]
        assert len(runs) == 1 and runs[0]["outcome"] == "ok" and runs[0]["exit_code"] == 0, runs
    by_id = {i: next(e for e in trace(out, r) if e.get("action") == "run_python")["stdout"].strip()
             for i, r in got.items()}
    assert by_id["test/prealgebra/1.json"] == "0.5" and by_id["test/intermediate_algebra/27.json"] == "55"
    assert by_id["test/algebra/11.json"] == "[-2, 3]"
    report = json.loads((out / "report.json").read_text())
    assert report["n_correct"] == sum(EXPECTED.values()) == 22


def test_majority_vote_over_epochs_groups_equivalent_answers(tmp_path):
    """Three epochs answer 0.75, \\frac{1}{2} and 0.5: the math scorer's normaliser makes the last two
    one answer, so the majority is 1/2 (right); grouped as text it would be a three-way tie won by 0.75."""
    data = tmp_path / "test.jsonl"
    data.write_text(json.dumps({"problem": "What is 2/4?", "solution": "...", "answer": "\\frac{1}{2}",
                                "subject": "Prealgebra", "level": 1, "unique_id": "test/prealgebra/1.json"}) + "\n")
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"instance_id": "test/prealgebra/1.json", "epoch": e,
                                          "turns": [{"content": f"So it is \\boxed{{{a}}}."}]}) + "\n"
                              for e, a in ((1, "0.75"), (2, "\\frac{1}{2}"), (3, "0.5"))))
    config = tmp_path / "config.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    out = tmp_path / "out"
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--scorer", "math", "--epochs", 3, "--reducer", "majority", "--reducer", "mean")
    assert proc.returncode == 0, explain(proc)
    report = json.loads((out / "report.json").read_text())
    majority = report["epochs"]["reducers"]["majority"]
    assert majority["passed"] == 1 and majority["ties"] == []
    assert report["accuracy"] == 1.0  # the headline is the majority vote
    assert report["epochs"]["reducers"]["mean"]["value"] == pytest.approx(2 / 3)
    assert report["breakdowns"]["subject"]["Prealgebra"]["n"] == 3
