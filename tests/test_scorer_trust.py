"""No silent scorer: a scorer that raises, returns nonsense or cannot parse its judge's reply is a
counted `scorer` error (no verdict, left out of the headline's denominator and said beside it),
shown in report.json, the terminal and the HTML report, and `harness run` / `harness score` exit 3.
A plug-in with the wrong signature is refused when loaded (exit 2, before any container).
"""

from __future__ import annotations

import json
import time

import pytest
from rich.console import Console

from harness import exit_codes
from harness.config import Scoring
from harness.errors import InputError
from harness.report import build_report, render
from harness.results.model import ResultRow
from harness.runner.phases.report import exit_code as _exit_code
from harness.runner.scorers import build_scorers
from harness.scoring import LLMJudgeScorer, get_scorer
from harness.scoring.apply import MAX_ERROR, score_row
from harness.scoring.base import ScoreContext
from harness.scoring.judge import MAX_REPLY
from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers.e2e import (
    FAKE_KEY_ENV,
    SUM,
    containers_created_between,
    explain,
    harness,
    one_instance,
    rows,
    run_replayed,
)
from tests.test_html_report import open_report, report

CTX = ScoreContext(question="Sum column x of nums.csv.")
HELPERS = "tests.helpers.scorers"
WIDE = {"COLUMNS": "250"}  # the table unwrapped, so a test reads its rows whole


def table_text(rep) -> str:
    console = Console(width=200, record=True)
    console.print(render(rep))
    return console.export_text()


# ------------------------------------------------------------------ a scorer's failure is its own verdict
def test_a_raising_scorer_gives_no_verdict_with_its_message_on_one_line():
    (bad,) = build_scorers(Scoring(names=(f"{HELPERS}:raises",)))
    scores, correct = score_row("6", "6", [bad, get_scorer("gaia")], CTX)
    assert correct is None and scores["gaia"]["correct"] is True
    why = scores["raises"]["explanation"]
    assert why == "scorer error: RuntimeError: scorer bug: cannot compare second line of the message"

    class Verbose:
        name = "verbose"

        def score(self, answer, target, *, context):
            raise ValueError("x" * 5000)

    (long,) = score_row("6", "6", [Verbose()], CTX)[0].values()
    assert long["correct"] is None and len(long["explanation"]) == MAX_ERROR


def test_a_class_scorer_that_returns_a_bool_is_a_scorer_error_not_a_crash():
    (bad,) = build_scorers(Scoring(names=(f"{HELPERS}:ReturnsBool",)))
    scores, correct = score_row("6", "6", [bad], CTX)
    assert correct is None
    assert scores["returns_bool"]["explanation"] == ("scorer error: ScorerError: returns_bool.score returned bool, "
                                                     "not a Score")


@pytest.mark.parametrize("spec,shown", [("two_args", "two_args(answer, target)"),
                                        ("OldStyle", "score(answer, target)")])
def test_the_old_two_argument_signature_is_refused_when_loaded(spec, shown):
    with pytest.raises(InputError) as caught:
        build_scorers(Scoring(names=(f"{HELPERS}:{spec}",)))
    message = str(caught.value)
    assert f"--scorer {HELPERS}:{spec}" in message and "(answer, target, *, context)" in message
    assert shown in message and "\n" not in message


def test_signatures_that_fit_load_partials_and_callables_included(monkeypatch):
    import functools

    import tests.helpers.scorers as module

    monkeypatch.setattr(module, "partial_ok", functools.partial(lambda unit, answer, target, *, context: True, 1),
                        raising=False)
    monkeypatch.setattr(module, "partial_bad", functools.partial(lambda unit, answer, target: True, 1), raising=False)
    monkeypatch.setattr(module, "catch_all", lambda *args, **kwargs: True, raising=False)
    for name in ("partial_ok", "catch_all", "said_six", "QuestionMentionsCsv"):
        build_scorers(Scoring(names=(f"{HELPERS}:{name}",)))
    with pytest.raises(InputError, match="partial_bad"):
        build_scorers(Scoring(names=(f"{HELPERS}:partial_bad",)))


def test_an_unparseable_judge_reply_is_kept_bounded_and_is_no_verdict():
    reply = "I weighed both answers carefully. " + "Hmm. " * 400
    score = LLMJudgeScorer(lambda prompt: reply).score("Lyon", "Paris", context=CTX)
    assert score.correct is None
    assert score.explanation.startswith("scorer error: judge reply unparseable: 'I weighed both answers carefully.")
    assert reply[:MAX_REPLY] in score.explanation and reply not in score.explanation
    assert f"{len(reply) - MAX_REPLY} more characters" in score.explanation
    assert score.details["reply"].startswith(reply[:MAX_REPLY]) and len(score.details["reply"]) < MAX_REPLY + 40


# ------------------------------------------------------------------ the report: counted, said, not a 0
def _row(iid: str, verdict: bool | None, why: str = "", level: int = 1, **kw) -> ResultRow:
    score = {"scorer": "gaia", "correct": verdict, "value": float(verdict is True), "explanation": why}
    return ResultRow(instance_id=iid, status="ok", correct=verdict, level=level, scores={"gaia": score}, **kw)


ROWS = [_row("a", True), _row("b", False), _row("c", None, "scorer error: TypeError: boom"),
        _row("d", None, "scorer error: TypeError: boom again", level=2),
        ResultRow(instance_id="e", status="error", error_kind="agent", correct=False, level=2)]


def test_the_headline_leaves_out_instances_without_a_verdict_and_says_so():
    rep = build_report(ROWS, ["a", "b", "c", "d", "e"], leaked_containers=0)
    # judged: a (right), b (wrong), e (errored: the agent's failure counts as wrong); c and d not judged
    assert (rep.n_selected, rep.n_judged, rep.n_no_verdict, rep.n_correct) == (5, 3, 2, 1)
    assert rep.accuracy == pytest.approx(1 / 3)
    assert rep.ids["no_verdict"] == ["c", "d"] and rep.ids["failed"] == ["b"] and rep.ids["errored"] == ["e"]
    gaia = rep.scorers["gaia"]
    assert (gaia.n, gaia.no_verdict, gaia.correct, gaia.first_error) == (5, 2, 1, "scorer error: TypeError: boom")
    assert gaia.accuracy == pytest.approx(1 / 3)
    assert (rep.per_level["1"].no_verdict, rep.per_level["1"].accuracy) == (1, 0.5)
    assert (rep.per_level["2"].no_verdict, rep.per_level["2"].accuracy) == (1, 0.0)
    assert rep.missing_verdicts() == "no verdict: gaia 2 of 5 (first: scorer error: TypeError: boom)"
    assert _exit_code(rep) == exit_codes.INSTANCE_ERRORS
    shown = table_text(rep)
    assert "accuracy (gaia)" in shown and "1/3 = 33.3%" in shown and "2 of 5 not judged: no verdict" in shown
    assert "no verdict (gaia)" in shown and "2 of 5; first: scorer error: TypeError: boom" in shown
    assert "scorer: 2 verdict(s) missing" in shown
    assert "level 1" in shown and "1/2 = 50.0%" in shown and "(1 not judged: no verdict)" in shown


def test_every_verdict_reached_exits_0_and_says_nothing_of_verdicts():
    rep = build_report(ROWS[:2], ["a", "b"], leaked_containers=0)
    assert rep.missing_verdicts() is None and _exit_code(rep) == exit_codes.OK
    assert "not judged" not in table_text(rep) and "no verdict" not in table_text(rep)


def test_with_epochs_an_id_without_a_verdict_is_left_out_of_the_reducers():
    rows_ = [_row("a", True, epoch=1), _row("a", True, epoch=2), _row("b", False, epoch=1),
             _row("b", None, "scorer error: X", epoch=2)]
    rep = build_report(rows_, ["a", "b"], leaked_containers=0, epochs=2, reducers=["mean"])
    assert rep.accuracy == 1.0 and (rep.n_judged, rep.n_no_verdict) == (1, 1) and rep.ids["no_verdict"] == ["b"]
    assert rep.epochs.reducers["mean"].value == 1.0
    assert (rep.epochs.per_epoch["1"].accuracy, rep.epochs.per_epoch["2"].accuracy) == (0.5, 1.0)
    assert rep.epochs.per_epoch["2"].no_verdict == 1


# ------------------------------------------------------------------ end to end: real runs, real sandboxes
def _no_verdict_shown(proc, out, name: str, first: str) -> dict:
    """The run's scorer error: exit 3, one line naming scorer and count, report.json and the table."""
    assert proc.returncode == exit_codes.INSTANCE_ERRORS, explain(proc)
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is None and row["scores"][name]["correct"] is None
    rep = json.loads((out / "report.json").read_text())
    counts = (rep["n_selected"], rep["n_judged"], rep["n_no_verdict"], rep["ids"]["no_verdict"])
    assert counts == (1, 0, 1, ["only one"])
    assert rep["scorers"][name]["no_verdict"] == 1 and rep["scorers"][name]["first_error"].startswith(first)
    line = next(line for line in proc.stderr.splitlines() if line.startswith("no verdict:"))
    assert line.startswith(f"no verdict: {name} 1 of 1 (first: {first}")
    assert f"accuracy ({name})" in proc.stdout and "none judged  (1 of 1 not judged: no verdict)" in proc.stdout, \
        proc.stdout
    assert f"no verdict ({name})" in proc.stdout
    return rep


@pytest.mark.docker
def test_a_raising_scorer_in_a_real_run_exits_3_counted_and_shown_in_the_html(tmp_path, page):
    proc, out = run_replayed(tmp_path, SUM, "--scorer", f"{HELPERS}:raises", "--scorer", "gaia", env=WIDE)
    _no_verdict_shown(proc, out, "raises", "scorer error: RuntimeError: scorer bug: cannot compare")
    assert rows(out)[0]["scores"]["gaia"]["correct"] is True  # the other scorer's verdict stands
    html = report([out], tmp_path / "report.html")
    open_report(page, html)
    assert page.errors == []
    card = page.inner_text("#no-verdict")
    assert "raises: no verdict: 1 of 1; first: scorer error: RuntimeError: scorer bug" in card
    assert "no errors" not in page.inner_text("#chart-errors")
    assert "scorer raises" in page.inner_text("#chart-errors")
    assert "1 not judged" in page.inner_text("#chart-accuracy")
    # A rescore with a scorer that works judges the answers the run kept: exit 0, every verdict reached.
    fixed = harness("score", out, "--scorer", "gaia")
    assert fixed.returncode == 0, explain(fixed)
    assert json.loads((out / "report.json").read_text())["n_judged"] == 1 and "no verdict" not in fixed.stdout


@pytest.mark.docker
def test_a_scorer_returning_nonsense_exits_3_in_run_and_score(tmp_path):
    proc, out = run_replayed(tmp_path, SUM, "--scorer", f"{HELPERS}:broken", env=WIDE)
    _no_verdict_shown(proc, out, "broken", "scorer error: ScorerError: broken returned str")
    again = harness("score", out, "--scorer", f"{HELPERS}:broken", "--scorer", "gaia", env=WIDE)
    assert again.returncode == exit_codes.INSTANCE_ERRORS, explain(again)
    assert "no verdict: broken 1 of 1 (first: scorer error: ScorerError: broken returned str" in again.stderr
    assert "accuracy (broken)" in again.stdout


@pytest.mark.docker
def test_an_old_two_argument_scorer_exits_2_before_any_container(tmp_path):
    data, config = one_instance(tmp_path, SUM)
    out = tmp_path / "never"
    since = time.time()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                   "--scorer", f"{HELPERS}:two_args")
    until = time.time()
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    (line,) = [line for line in proc.stderr.splitlines() if line.strip()]
    assert f"--scorer {HELPERS}:two_args" in line and "(answer, target, *, context)" in line
    assert containers_created_between("only one", since, until, out) == []
    assert not (out / "output.jsonl").exists()


@pytest.mark.docker
def test_a_judge_reply_that_does_not_parse_is_a_counted_scorer_error(tmp_path):
    reply = "Both answers look plausible to me; I would rather not decide. " * 20
    data, config = one_instance(tmp_path, SUM)
    out = tmp_path / "judged"
    with FakeOpenAI([text(reply, usage=(50, 30))]) as judge:
        config.write_text(config.read_text() + f"""
[llm.judge]
model = "judge-model"
base_url = "{judge.base_url}"
api_key_env = "{FAKE_KEY_ENV}"
max_retries = 0
""")
        proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out,
                       "--scorer", "llm_judge", "--scorer", "gaia", "--judge-model", "judge", env=WIDE)
        assert len(judge.chat_requests) == 1
    rep = _no_verdict_shown(proc, out, "llm_judge", "scorer error: judge reply unparseable: 'Both answers look")
    kept = rows(out)[0]["scores"]["llm_judge"]
    assert reply[:MAX_REPLY] in kept["explanation"] and reply not in kept["explanation"]
    assert rep["scorers"]["gaia"]["no_verdict"] == 0 and rep["scorers"]["gaia"]["correct"] == 1
