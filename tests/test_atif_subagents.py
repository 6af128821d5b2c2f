"""`harness export --format atif` of a team's run and of a Gaia2 run with app agents: each member, each app agent, an
ATIF-v1.8 sub-trajectory embedded in the trial's (`subagent_trajectories`), linked from the root's steps by
`subagent_trajectory_ref` (docs/results.md#atif). Checked by the `atif` package's models and, in the slow test, by
Harbor 0.25's own TrajectoryValidator in a Python 3.12 venv (tests/helpers/harbor_runner.py `harbor_venv`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.e2e import SUM, explain, harness, rows, run_replayed
from tests.test_export import _atif_files, _hand_run


def _trace_run(tmp_path: Path, events: list[dict], usage: dict) -> Path:
    """A hand-made run whose one trial has a trace of `events` and the row's `usage`."""
    run = _hand_run(tmp_path, ["7"])
    (run / "traces").mkdir()
    (run / "traces" / "q-1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (row,) = [json.loads(line) for line in (run / "output.jsonl").read_text().splitlines()]
    row.update(trace="traces/q-1.jsonl", usage=usage)
    (run / "output.jsonl").write_text(json.dumps(row) + "\n")
    return run


def _exported(run: Path, out: Path) -> dict:
    proc = harness("export", run, "--format", "atif", "--out", out)
    assert proc.returncode == 0, explain(proc)
    (doc,) = _atif_files(out).values()
    return doc


def _refs(doc: dict) -> list[tuple[int, dict]]:
    """Every (root step id, ref) of the root's steps and results, each resolved: its sub-trajectory is embedded and
    the steps it names are that sub-trajectory's."""
    subs = {s["trajectory_id"]: s for s in doc.get("subagent_trajectories") or []}
    found = []
    for step in doc["steps"]:
        for result in (step.get("observation") or {}).get("results", []):
            for ref in result.get("subagent_trajectory_ref") or []:
                sub = subs[ref["trajectory_id"]]
                first, last = ref["extra"]["first_step_id"], ref["extra"]["last_step_id"]
                assert 1 <= first <= last <= len(sub["steps"]), (ref, len(sub["steps"]))
                found.append((step["step_id"], ref))
    return found


def _sub(doc: dict, name: str) -> dict:
    (sub,) = [s for s in doc["subagent_trajectories"] if s["trajectory_id"] == name]
    return sub


ADD = {"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {"type": "object"}}}


def test_a_teams_members_are_sub_trajectories_linked_from_the_root_turn_by_turn(tmp_path):
    at = 1_800_000_000.0
    run = _trace_run(tmp_path, [
        {"t": 0.01, "type": "task", "task": "What is 3+4?"},
        {"t": 0.02, "type": "system_prompt", "source": "solver", "content": "You solve."},
        {"t": 0.03, "type": "system_prompt", "source": "reviewer", "content": "You review."},
        {"t": 0.04, "type": "tools", "tools": [ADD], "agents": {"solver": ["add"]}, "members": ["solver", "reviewer"]},
        {"t": 0.1, "type": "model_call_started", "model": "m", "at": at + 0.1, "agent": "solver"},
        {"t": 0.2, "type": "model_call", "model": "m", "agent": "solver", "usage": {"prompt_tokens": 10,
         "completion_tokens": 2}, "tool_calls": [{"name": "add", "arguments": {"a": 3, "b": 4}}]},
        {"t": 0.3, "type": "tool_call", "source": "solver", "name": "add", "arguments": {"a": 3, "b": 4},
         "call_id": "c1"},
        {"t": 0.4, "type": "model_call", "model": "m", "agent": "solver", "content": "It is 7.",
         "usage": {"prompt_tokens": 20, "completion_tokens": 3}},
        {"t": 0.41, "type": "tool_result", "name": "add", "call_id": "c1", "content": "7"},  # AutoGen's order
        {"t": 0.42, "type": "message", "source": "solver", "content": "It is 7."},
        {"t": 0.5, "type": "model_call", "model": "m", "agent": "reviewer", "content": "Are you sure?",
         "usage": {"prompt_tokens": 30, "completion_tokens": 4}},
        {"t": 0.51, "type": "message", "source": "reviewer", "content": "Are you sure?"},
        {"t": 0.6, "type": "model_call", "model": "m", "agent": "solver", "content": "Yes: 7.",
         "usage": {"prompt_tokens": 40, "completion_tokens": 5}},
        {"t": 0.61, "type": "message", "source": "solver", "content": "Yes: 7."},
        {"t": 0.7, "type": "model_call", "model": "m", "agent": "reviewer", "content": "<solution>7</solution>",
         "usage": {"prompt_tokens": 50, "completion_tokens": 6}},
        {"t": 0.71, "type": "message", "source": "reviewer", "content": "<solution>7</solution>"},
    ], usage={"prompt_tokens": 150, "completion_tokens": 20, "llm_calls": 5, "cost": 0.5})
    doc = _exported(run, tmp_path / "atif")
    assert [(s["source"], s["message"], (s.get("extra") or {}).get("agent")) for s in doc["steps"]] == [
        ("user", "What is 3+4?", None), ("agent", "It is 7.", "solver"), ("agent", "Are you sure?", "reviewer"),
        ("agent", "Yes: 7.", "solver"), ("agent", "<solution>7</solution>", "reviewer")]
    assert all(s["llm_call_count"] == 0 and "metrics" not in s for s in doc["steps"][1:])  # the team's dispatch
    assert [(n, r["trajectory_id"], r["extra"]["first_step_id"], r["extra"]["last_step_id"]) for n, r in _refs(doc)] \
        == [(2, "solver", 2, 3), (3, "reviewer", 2, 2), (4, "solver", 4, 4), (5, "reviewer", 3, 3)]
    solver, reviewer = _sub(doc, "solver"), _sub(doc, "reviewer")
    assert [s["trajectory_id"] for s in doc["subagent_trajectories"]] == ["solver", "reviewer"]
    assert [(s["source"], s["message"]) for s in solver["steps"]] == [
        ("system", "You solve."), ("agent", ""), ("agent", "It is 7."), ("agent", "Yes: 7.")]
    assert solver["steps"][1]["tool_calls"][0]["tool_call_id"] == "c1"
    assert solver["steps"][1]["observation"]["results"] == [{"source_call_id": "c1", "content": "7"}]
    assert solver["agent"]["tool_definitions"] == [ADD] and "tool_definitions" not in reviewer["agent"]
    assert solver["agent"]["extra"] == {"framework": "harness", "team": None, "role": "team member"}
    assert (solver["final_metrics"]["total_prompt_tokens"], solver["final_metrics"]["total_steps"]) == (70, 4)
    assert reviewer["final_metrics"]["total_prompt_tokens"] == 80 and reviewer["session_id"] == doc["session_id"]
    metrics = doc["final_metrics"]  # the trial's: every model call's, the sub-agents' too, as the row counted them
    assert (metrics["total_prompt_tokens"], metrics["total_completion_tokens"], metrics["total_steps"],
            metrics["total_cost_usd"], metrics["extra"]) == (150, 20, 5, 0.5, {"includes_subagents": True})
    assert "notes" not in doc


def test_a_gaia2_app_agents_run_is_a_sub_trajectory_linked_from_the_tool_result_it_answered(tmp_path):
    expert = "Emails__expert_agent"
    app = {"agent": "Emails", "via": expert}
    run = _trace_run(tmp_path, [
        {"t": 0.01, "type": "task", "task": "Forward Greg's email."},
        {"t": 0.1, "type": "model_call", "model": "m", "usage": {"prompt_tokens": 10, "completion_tokens": 1},
         "tool_calls": [{"name": expert, "arguments": {"task": "forward it"}}]},
        {"t": 0.2, "type": "tool_call", "source": "assistant", "name": expert, "arguments": {"task": "forward it"},
         "call_id": "e1"},
        {"t": 0.3, "type": "model_call_started", "model": "m", "at": 1_800_000_000.3, **app},
        {"t": 0.4, "type": "model_call", "model": "m", "content": "Thought: list.", **app,
         "usage": {"prompt_tokens": 20, "completion_tokens": 2}, "messages": [{"role": "system", "content": "ARE"}]},
        {"t": 0.5, "type": "model_call", "model": "m", "content": "Thought: done.", **app,
         "usage": {"prompt_tokens": 30, "completion_tokens": 3}},
        {"t": 0.6, "type": "env", "env": "gaia2", "action": expert, "outcome": "ok"},
        {"t": 0.7, "type": "tool_result", "name": expert, "call_id": "e1", "content": "task completed"},
        {"t": 0.8, "type": "model_call", "model": "m", "content": "<solution>done</solution>",
         "usage": {"prompt_tokens": 40, "completion_tokens": 4}},
    ], usage={"prompt_tokens": 100, "completion_tokens": 10, "llm_calls": 4})
    doc = _exported(run, tmp_path / "atif")
    steps = doc["steps"]
    assert [(s["source"], s["message"]) for s in steps] == [
        ("user", "Forward Greg's email."), ("agent", ""), ("agent", "<solution>done</solution>")]
    assert steps[1]["extra"]["env_actions"][0]["action"] == expert
    assert steps[1]["observation"]["results"] == [{
        "source_call_id": "e1", "content": "task completed",
        "subagent_trajectory_ref": [{"trajectory_id": "Emails", "extra": {"first_step_id": 1, "last_step_id": 2}}]}]
    emails = _sub(doc, "Emails")
    assert [(s["source"], s["message"]) for s in emails["steps"]] == [
        ("agent", "Thought: list."), ("agent", "Thought: done.")]
    assert emails["steps"][0]["extra"]["request_messages"] == [{"role": "system", "content": "ARE"}]
    assert emails["agent"]["extra"]["role"] == "app agent" and emails["agent"]["extra"]["via"] == expert
    assert doc["final_metrics"]["total_prompt_tokens"] == 100 and doc["final_metrics"]["total_steps"] == 3
    assert len(_refs(doc)) == 1


def test_a_tool_result_traced_after_the_next_model_call_is_the_calling_steps(tmp_path):
    """AutoGen streams a tool's result after the model call that read it: it went to that later step, unmatched
    (source_call_id none), before."""
    run = _trace_run(tmp_path, [
        {"t": 0.01, "type": "task", "task": "What is 3+4?"},
        {"t": 0.1, "type": "model_call", "model": "m", "tool_calls": [{"name": "add", "arguments": {}}]},
        {"t": 0.2, "type": "tool_call", "source": "assistant", "name": "add", "arguments": {}, "call_id": "c1"},
        {"t": 0.3, "type": "model_call", "model": "m", "content": "<solution>7</solution>"},
        {"t": 0.31, "type": "tool_result", "name": "add", "call_id": "c1", "content": "7"},
    ], usage={})
    steps = _exported(run, tmp_path / "atif")["steps"]
    assert steps[1]["observation"]["results"] == [{"source_call_id": "c1", "content": "7"}]
    assert "observation" not in steps[2]


def _team_export(tmp_path: Path, kind: str) -> tuple[dict, list[dict], Path]:
    """A real `harness run --agent KIND` (a replayed model, the sandbox a real container) exported as ATIF."""
    from tests.test_magentic import TURNS

    turns = SUM + [{"content": "Checked: <solution>6</solution>"}] if kind == "roundrobin" else TURNS
    proc, out = run_replayed(tmp_path, turns, "--agent", kind)
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["correct"] is True, row
    events = [json.loads(line) for line in (out / row["trace"]).read_text().splitlines()]
    return _exported(out, tmp_path / "atif"), events, tmp_path / "atif"


@pytest.mark.docker
@pytest.mark.parametrize("kind", ["roundrobin", "magentic"])
def test_a_real_teams_export_has_one_sub_trajectory_per_member_each_linked(tmp_path, kind):
    doc, events, _ = _team_export(tmp_path, kind)
    (offered,) = [e for e in events if e["type"] == "tools"]
    members = offered["members"]
    assert members == (["solver", "reviewer"] if kind == "roundrobin" else
                       ["web_surfer", "file_surfer", "coder", "executor"])
    assert [s["trajectory_id"] for s in doc["subagent_trajectories"]] == members  # one per member, in order
    spoke = {e["source"] for e in events if e["type"] == "message"} & set(members)
    assert {r["trajectory_id"] for _, r in _refs(doc)} == spoke  # each member that acted is linked from the root
    calls = [e for e in events if e["type"] == "model_call"]
    for name in members:
        sub = _sub(doc, name)
        assert sub["steps"][0]["source"] == "system" and sub["agent"]["extra"]["role"] == "team member"
        own = [s for s in sub["steps"] if "metrics" in s]
        assert len(own) == sum(1 for e in calls if e.get("agent") == name)  # its model calls, and only its
        assert {c["function_name"] for s in sub["steps"] for c in s.get("tool_calls", [])} <= set(
            (offered["agents"] or {}).get(name, []))
    root_calls = [s for s in doc["steps"] if "metrics" in s]  # the manager's (Magentic-One's orchestrator)
    assert len(root_calls) == sum(1 for e in calls if e.get("agent") not in members)
    assert len(root_calls) == (0 if kind == "roundrobin" else 6)
    if kind == "roundrobin":  # the solver's tool call, its result in the same step
        (step,) = [s for s in _sub(doc, "solver")["steps"] if s.get("tool_calls")]
        assert step["observation"]["results"][0]["source_call_id"] == step["tool_calls"][0]["tool_call_id"]


def _gaia2_export(tmp_path: Path) -> tuple[dict, list[dict], Path]:
    """A real Gaia2 agent2agent run (tests/test_gaia2_a2a.py: ARE's Emails app agent on a fake model) exported."""
    from tests.test_gaia2_a2a import _run

    row, _, out = _run(tmp_path)
    events = [json.loads(line) for line in (out / row["trace"]).read_text().splitlines()]
    return _exported(out, tmp_path / "atif"), events, tmp_path / "atif"


@pytest.mark.docker
def test_a_real_gaia2_app_agent_is_a_sub_trajectory_linked_from_the_root(tmp_path):
    doc, events, _ = _gaia2_export(tmp_path)
    calls = [e for e in events if e["type"] == "model_call"]
    assert len(calls) == 3 and all((e["agent"], e["via"]) == ("Emails", "Emails__expert_agent") for e in calls)
    (emails,) = doc["subagent_trajectories"]
    assert emails["trajectory_id"] == "Emails" and emails["agent"]["extra"]["role"] == "app agent"
    assert [s["message"].split("\n")[0] for s in emails["steps"]] == [
        "Thought: I list the inbox.", "Thought: I forward Greg's email.", "Thought: Done."]
    (link,) = _refs(doc)  # the scripted agent calls the app's tool untraced: a root step of its own links the run
    assert link[1] == {"trajectory_id": "Emails", "extra": {"first_step_id": 1, "last_step_id": 3}}
    assert doc["final_metrics"]["total_prompt_tokens"] == sum(e["usage"]["prompt_tokens"] for e in calls)


HARBOR_CHECK = """
import json, sys
from harbor.utils.trajectory_validator import TrajectoryValidator
found = {}
for path in sys.argv[1:]:
    validator = TrajectoryValidator()
    validator.validate(path)
    found[path] = validator.get_errors()
print(json.dumps(found))
"""


def harbor_errors(paths: list[Path]) -> dict[str, list[str]]:
    """Harbor 0.25's TrajectoryValidator's errors per file (none: valid), run in Harbor's own venv."""
    from tests.helpers.harbor_runner import Unavailable, harbor_venv

    try:
        python = harbor_venv() / "bin" / "python"
    except Unavailable as exc:
        pytest.skip(str(exc))
    done = subprocess.run([str(python), "-c", HARBOR_CHECK, *map(str, paths)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow  # Harbor's venv is made on first use (about 2 minutes), then reused
@pytest.mark.docker
def test_harbors_own_validator_accepts_the_team_and_app_agent_exports(tmp_path):
    paths = []
    for kind in ("roundrobin", "magentic", "gaia2"):
        (tmp_path / kind).mkdir()
        doc, _, out = _gaia2_export(tmp_path / kind) if kind == "gaia2" else _team_export(tmp_path / kind, kind)
        assert doc["subagent_trajectories"]
        paths += sorted(out.rglob("trajectory.json"))
    assert harbor_errors(paths) == {str(p): [] for p in paths}
