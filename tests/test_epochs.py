"""--epochs and the reducers: hand-computed results, the report, and a real run resumed per epoch."""

from __future__ import annotations

import json
import secrets

import pytest

from harness.errors import InputError
from harness.report.build import build_report
from harness.results.model import ResultRow
from harness.scoring.reducers import Epoch, agreement, majority, parse_reducer, pass_at_k, pass_hat_k, reduce
from tests.helpers.e2e import explain, harness, rows, trace


def ep(answer, correct, value=None):
    return Epoch(answer, correct, float(correct) if value is None else value)


# --- the reducers, by hand ---------------------------------------------------------------------

def test_pass_at_k_is_the_unbiased_estimator():
    # n=5, c=2: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@4 = 1 - C(3,4)/.. = 1
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 4) == 1.0
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(3, 3, 1) == 1.0


def test_pass_hat_k_is_the_chance_all_k_draws_pass():
    # n=5, c=3: pass^1 = 3/5; pass^2 = C(3,2)/C(5,2) = 3/10; pass^3 = 1/10; pass^4 = 0 (C(3,4) = 0)
    assert pass_hat_k(5, 3, 1) == pytest.approx(0.6)
    assert pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    assert pass_hat_k(5, 3, 3) == pytest.approx(0.1)
    assert pass_hat_k(5, 3, 4) == 0.0
    assert pass_hat_k(4, 4, 4) == 1.0 and pass_hat_k(4, 0, 1) == 0.0
    assert pass_hat_k(2, 2, 3) == 0.0  # fewer samples than k: no estimate above 0
    # pass^k never exceeds pass@k, and they meet at k = 1
    assert pass_hat_k(5, 3, 1) == pytest.approx(pass_at_k(5, 3, 1))


def test_pass_hat_k_reducer_passes_when_k_epochs_are_correct():
    epochs = [ep("6", True), ep("7", False), ep("6", True), ep("6", True)]
    assert parse_reducer(" PASS^3 ", 4) == "pass^3"
    two = reduce("pass^2", epochs)
    assert two.value == pytest.approx(3 / 6) and two.passed  # C(3,2)/C(4,2)
    three = reduce("pass^3", epochs)
    assert three.value == pytest.approx(1 / 4) and three.passed  # C(3,3)/C(4,3)
    four = reduce("pass^4", epochs)
    assert four.value == 0.0 and not four.passed


def test_mean_uses_score_values_so_graded_scores_count_half():
    epochs = [ep("a", True), ep("b", False, 0.5), ep(None, False)]
    assert reduce("mean", epochs).value == pytest.approx(0.5) and reduce("mean", epochs).passed
    assert not reduce("mean", [ep("a", True), ep("b", False), ep("c", False)]).passed


def test_majority_takes_the_modal_normalised_answer():
    epochs = [ep("Paris", True), ep("london", False), ep(" paris. ", True), ep(None, False)]
    got = majority(epochs)
    assert got.answer == "Paris" and got.passed and got.value == 1.0 and not got.tie


def test_majority_tie_goes_to_the_first_in_epoch_order_and_is_reported():
    got = majority([ep("7", False), ep("6", True), ep("6", True), ep("7", False)])
    assert got.tie and got.answer == "7" and not got.passed
    assert majority([ep(None, False), ep(None, False)]).value == 0.0  # nobody voted


def test_majority_groups_by_the_scorers_normaliser():
    same = lambda text: "half" if text.replace(" ", "") in ("0.5", r"\frac{1}{2}", "1/2") else text  # noqa: E731
    got = majority([ep("3", False), ep(r"\frac{1}{2}", True), ep("0.5", True)], same)
    assert got.answer == r"\frac{1}{2}" and got.passed and not got.tie


def test_at_least_n_and_agreement():
    epochs = [ep("6", True), ep("7", False), ep("6", True)]
    assert reduce("at_least_2", epochs).value == 1.0
    assert reduce("at_least_3", epochs).value == 0.0
    assert reduce("pass@2", epochs).value == pytest.approx(1.0)  # 1 - C(1,2)/C(3,2) = 1
    assert reduce("pass@1", epochs).value == pytest.approx(2 / 3)
    share, all_agree = agreement(epochs)
    assert share == pytest.approx(1 / 3) and not all_agree  # pairs (6,7) (6,6) (7,6)


@pytest.mark.parametrize("name,error", [("pass@4", "--epochs"), ("pass^4", "--epochs"), ("pass^0", "--epochs"),
                                        ("at_least_0", "--epochs"), ("best", "pass\\^K")])
def test_bad_reducers_are_input_errors(name, error):
    with pytest.raises(InputError, match=error):
        parse_reducer(name, 3)


# --- the report ---------------------------------------------------------------------------------

def row(iid, epoch, answer, correct, status="ok"):
    return ResultRow(instance_id=iid, epoch=epoch, status=status, answer=answer, correct=correct,
                     error_kind="agent" if status == "error" else None,
                     scores={"gaia": {"scorer": "gaia", "correct": correct, "value": float(bool(correct))}})


def test_report_of_three_epochs_by_hand():
    rows_ = [row("a", 1, "6", True), row("a", 2, "7", False), row("a", 3, "6", True),
             row("b", 1, "1", False), row("b", 2, "2", False), row("b", 3, "9", True),
             row("c", 1, "x", True), row("c", 2, None, False, status="error"), row("c", 3, "x", True)]
    r = build_report(rows_, ["a", "b", "c"], leaked_containers=0, epochs=3,
                     reducers=["majority", "mean", "pass@2", "pass^2", "at_least_3"])
    e = r.epochs
    assert e.k == 3 and e.primary == "majority"
    # majority: a -> "6" (right), b -> three-way tie, "1" first (wrong), c -> "x" (right)
    assert e.reducers["majority"].passed == 2 and e.reducers["majority"].ties == ["b"]
    assert e.reducers["mean"].value == pytest.approx((2 / 3 + 1 / 3 + 2 / 3) / 3)
    assert e.reducers["pass@2"].value == pytest.approx((1 + (1 - 1 / 3) + 1) / 3)  # b: 1 - C(2,2)/C(3,2)
    assert e.reducers["pass^2"].value == pytest.approx((1 / 3 + 0 + 1 / 3) / 3)  # a, c: C(2,2)/C(3,2); b: 0
    assert e.reducers["pass^2"].passed == 2
    assert e.reducers["at_least_3"].passed == 0
    assert {k: s.correct for k, s in e.per_epoch.items()} == {"1": 2, "2": 0, "3": 3}
    # headline = the first reducer; c has an errored epoch: listed as errored, counted as run
    assert r.n_correct == 2 and r.accuracy == pytest.approx(2 / 3)
    assert r.ids["errored"] == ["c"] and r.ids["passed"] == ["a"] and r.ids["failed"] == ["b"]
    assert r.n_errors == 1 and r.scorers["gaia"].n == 9
    # agreement: a 1/3 of pairs, b 0, c ("x", none, "x") 1/3; all agree nowhere
    assert e.agreement == pytest.approx((1 / 3 + 0 + 1 / 3) / 3) and e.all_agree == 0.0


def test_missing_epochs_count_as_wrong_and_missing():
    r = build_report([row("a", 1, "6", True)], ["a"], leaked_containers=0, epochs=2, reducers=["mean"])
    assert r.n_missing == 1 and r.ids["missing"] == ["a"] and r.accuracy == pytest.approx(0.5)


# --- a real run: each epoch in its own sandbox, resumed per epoch -------------------------------

def test_epochs_end_to_end_with_per_epoch_recordings(tmp_path):
    (tmp_path / "nums.csv").write_text("x\n1\n2\n3\n")
    (tmp_path / "data.jsonl").write_text(json.dumps({"instance_id": "sum", "question": "Sum column x of nums.csv.",
                                                     "answer": "6", "files": ["nums.csv"]}) + "\n")

    def turns(code, answer):
        return [{"tool_calls": [{"name": "run_python", "arguments": {"code": code}}]},
                {"content": f"<solution>{answer}</solution>"}]

    read = "import pandas as pd; print(pd.read_csv('nums.csv').x.sum()"
    replay = [{"instance_id": "sum", "epoch": 1, "turns": turns(read + ")", "6")},
              {"instance_id": "sum", "epoch": 2, "turns": turns(read + " + 1)", "7")},
              {"instance_id": "sum", "turns": turns(read + ")", "6.0")}]  # epochs without a line of their own
    (tmp_path / "replay.jsonl").write_text("".join(json.dumps(x) + "\n" for x in replay))
    (tmp_path / "config.toml").write_text(f'[llm.rec]\nkind = "replay"\npath = "{tmp_path / "replay.jsonl"}"\n')
    out = tmp_path / f"ep{secrets.token_hex(4)}"
    args = ["run", "--dataset", tmp_path / "data.jsonl", "--model", "rec", "--config", tmp_path / "config.toml",
            "--output-dir", out, "--epochs", 3, "--reducer", "majority", "--reducer", "pass@2", "--workers", 2]
    proc = harness(*args)
    assert proc.returncode == 0, explain(proc)
    got = sorted(rows(out), key=lambda r: r["epoch"])
    assert [(r["epoch"], r["answer"], r["correct"]) for r in got] == [(1, "6", True), (2, "7", False), (3, "6.0", True)]
    assert len({r["sandbox"] for r in got}) == 3 and len({r["trace"] for r in got}) == 3  # fresh sandbox each
    for r in got:  # each epoch really computed its answer in its sandbox
        runs = [e for e in trace(out, r) if e["type"] == "env" and e["action"] == "run_python"]
        assert runs[-1]["stdout"].strip() == ("7" if r["epoch"] == 2 else "6")
    report = json.loads((out / "report.json").read_text())
    assert report["epochs"]["reducers"]["majority"]["passed"] == 1  # "6" and "6.0" are one answer to GAIA
    assert report["epochs"]["reducers"]["pass@2"]["value"] == pytest.approx(1.0)
    assert report["accuracy"] == 1.0 and report["epochs"]["per_epoch"]["2"]["accuracy"] == 0.0
    assert "reducer majority" in proc.stdout and "epoch 2" in proc.stdout

    # Resume per (instance, epoch): drop epoch 2's row; only it runs again.
    lines = (out / "output.jsonl").read_text().splitlines()
    (out / "output.jsonl").write_text("".join(line + "\n" for line in lines if json.loads(line)["epoch"] != 2))
    again = harness(*args)
    assert again.returncode == 0, explain(again)
    assert "2 of 3 instance runs already finished, 1 to run" in again.stderr
    assert sorted(r["epoch"] for r in rows(out)) == [1, 2, 3]
    changed = harness(*[str(a) for a in args[:9]], "--epochs", 2)
    assert changed.returncode == 2 and "epochs" in changed.stderr
