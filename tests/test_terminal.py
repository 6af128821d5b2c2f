"""What the terminal says (issue 17, "a terminal that talks").

Real runs (replay model, plain runner, real sandboxes) in a subprocess whose stdout and stderr
are pipes, as under nohup, CI or Slurm: plain progress lines instead of a bar, one line per
instance that errors or hits a limit as it ends, the failed ids, the run directory and the
commands that open it at the end; `harness report DIR` prints the run's own table; Ctrl-C says
what stopped the run; input errors pydantic finds are one line naming the field.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.terminal import first_line, flat, listed
from tests.helpers.e2e import REPO, containers_of, explain, harness, out_dir

ANSWER = "7"
SUM = {"name": "run_python", "arguments": {"code": "print(3 + 4)"}}
SLEEP = {"name": "run_python", "arguments": {"code": "import time; time.sleep(120)"}}


def _call(call: dict) -> dict:
    return {"tool_calls": [call], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


def _answer(text: str) -> dict:
    return {"content": f"<solution>{text}</solution>", "usage": {"prompt_tokens": 10, "completion_tokens": 2}}


def _dataset(folder: Path, turns: dict[str, list[dict]], extra: dict[str, dict] | None = None) -> Path:
    """A jsonl dataset asking for 3 + 4, with replay.jsonl beside it playing `turns` per id."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "tasks.jsonl", "w") as fh:
        for iid in turns:
            fh.write(json.dumps({"instance_id": iid, "question": "What is 3 + 4?", "answer": ANSWER, "level": 1,
                                 **(extra or {}).get(iid, {})}) + "\n")
    with open(folder / "replay.jsonl", "w") as fh:
        for iid, script in turns.items():
            fh.write(json.dumps({"instance_id": iid, "turns": script}) + "\n")
    return folder / "tasks.jsonl"


def _table(stdout: str) -> str:
    """The report table of a command's stdout: from its title to its last rule."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Run report"))
    end = max(i for i, line in enumerate(lines) if line.startswith("└"))
    return "\n".join(lines[start:end + 1])


def test_messages_are_one_bounded_line_without_escapes():
    assert flat("a\nb\x1b[31m red\x1b[0m\tc\r") == "a b red c"
    assert first_line("\n  Traceback \x07(most recent)\n  File x\n") == "Traceback (most recent)"
    assert first_line("x" * 500, 200) == "x" * 199 + "…"
    assert listed([str(i) for i in range(13)]) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, +3 more"
    assert listed(["a", "b"]) == "a, b"


@pytest.mark.docker
def test_a_run_without_a_terminal_talks_and_report_prints_its_table(tmp_path, image):
    data = _dataset(tmp_path / "data", {
        "crash-1": [_answer(ANSWER)],  # the runner raises before the model is asked
        "steps": [_call(SUM), _call(SUM), _answer(ANSWER)],  # its row allows one model call: a limit
        "pass": [_call(SUM), _answer(ANSWER)],
        "wrong": [_answer("8")],
    }, extra={"steps": {"max_steps": 1}})
    out = out_dir(tmp_path)
    proc = harness("run", "--dataset", data, "--model", "replay", "--agent", "tests.helpers.runners:CrashesOnSome",
                   "--output-dir", out, "--workers", 1, env={"HARNESS_PROGRESS_EVERY": "0.3"})
    assert proc.returncode == 3, explain(proc)  # an instance errored
    err = proc.stderr.splitlines()
    for stream in (proc.stdout, proc.stderr):  # no bar, no colour: a log gets plain lines
        assert "\x1b" not in stream and "━" not in stream, explain(proc)

    # Progress: a plain line per 10% of the instances (here each one) and one per 0.3 s between them.
    progress = [line for line in err if line.startswith("progress: ")]
    # a replay costs nothing: its cost is $0 and so is the projection
    assert ("progress: 4/4 instances (100%), pass 1 (25% of done), errors 1, cost $0.0000 (projected $0.0000), "
            "elapsed ") in "\n".join(progress)
    assert all(", ETA " in line for line in progress)
    assert len(progress) > 4, progress  # the timer's lines besides the four instances' ones

    # The errored and the limited instance each say so as they end: before the instances after them end.
    (crash,) = [i for i, line in enumerate(err) if line.startswith("instance crash-1:")]
    assert err[crash] == "instance crash-1: error (agent): RuntimeError: the agent tripped over its own code"
    (steps,) = [i for i, line in enumerate(err) if line.startswith("instance steps:")]
    assert err[steps].startswith("instance steps: limit (max_steps): ") and "limit 1" in err[steps]
    assert crash < steps < err.index(next(line for line in progress if line.startswith("progress: 3/4")))
    assert "second line" not in proc.stderr

    # The end: the ids that did not pass, the run directory and the two commands that open it.
    lines = proc.stdout.splitlines()
    assert "errored (1): crash-1" in lines and "wrong answer (2): steps, wrong" in lines, proc.stdout
    assert "hit a limit (1): steps" in lines
    assert f"run directory: {out}" in lines
    assert f"harness report {out} --html" in proc.stdout and f"harness view {out}" in proc.stdout
    assert containers_of(out) == []

    # `harness report DIR` prints the table the run printed (from report.json), not dict reprs.
    report = harness("report", out)
    assert report.returncode == 0, explain(report)
    assert _table(report.stdout) == _table(proc.stdout)
    assert "errored (1): crash-1" in report.stdout and "{'" not in report.stdout + report.stderr
    assert "1/4 = 25.0%" in _table(report.stdout)

    # A run in progress (rows newer than report.json): the table is built from output.jsonl, and says so.
    later = time.time() + 5
    os.utime(out / "output.jsonl", (later, later))
    rebuilt = harness("report", out)
    assert rebuilt.returncode == 0, explain(rebuilt)
    assert "built from output.jsonl" in rebuilt.stdout and "1/4 = 25.0%" in _table(rebuilt.stdout)


@pytest.mark.docker
def test_ctrl_c_says_what_stopped_the_run(tmp_path, image):
    data = _dataset(tmp_path / "data", {"hang": [_call(SLEEP), _answer(ANSWER)]})
    out = out_dir(tmp_path)
    stderr = tmp_path / "stderr.txt"
    env = {**os.environ, "HARNESS_RETRY_BACKOFF": "0"}
    with open(stderr, "w") as err, open(tmp_path / "stdout.txt", "w") as std:
        # SIGINT back to its default, so the child's Python turns it into KeyboardInterrupt even when
        # this test runs in a background job (which starts with SIGINT ignored).
        proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--dataset", str(data), "--model", "replay",
                                 "--agent", "plain", "--output-dir", str(out), "--command-timeout", "300"],
                                cwd=REPO, env=env, stdout=std, stderr=err,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + 180
            traces = out / "traces"
            # The instance is under way once its trace holds the tool call (the sleep runs in the sandbox).
            while time.monotonic() < deadline and proc.poll() is None:
                if traces.is_dir() and any("tool_call" in p.read_text() for p in traces.glob("*.jsonl")):
                    break
                time.sleep(0.1)
            assert proc.poll() is None, stderr.read_text()
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = stderr.read_text()
    assert code == 130, text
    (line,) = [x for x in text.splitlines() if x.startswith("stopped")]
    assert line == (f"stopped by Ctrl-C (SIGINT): finished rows are kept in {out / 'output.jsonl'}; "
                    f"to resume, run again with --output-dir {out}")
    assert "()" not in text
    assert containers_of(out) == []


def test_a_bad_model_section_is_one_line_naming_each_field(tmp_path):
    data = _dataset(tmp_path / "data", {"a": [_answer(ANSWER)]})
    config = tmp_path / "models.toml"
    config.write_text('[llm.x]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\ntemperature = "hot"\n'
                      'max_connections = 0\n')
    proc = harness("run", "--dataset", data, "--model", "x", "--config", config, "--output-dir", out_dir(tmp_path))
    assert proc.returncode == 2, explain(proc)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error (input): [llm.x] in the config: temperature: ")
    assert "(got 'hot')" in line and "max_connections: Input should be greater than or equal to 1" in line
    assert "pydantic" not in line


def test_a_bad_sandbox_flag_is_one_line_naming_the_flag(tmp_path):
    data = _dataset(tmp_path / "data", {"a": [_answer(ANSWER)]})
    proc = harness("run", "--dataset", data, "--model", "replay", "--output-dir", out_dir(tmp_path), "--memory", "1x")
    assert proc.returncode == 2, explain(proc)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error (input): --memory: ") and "'1x'" in line


def test_say_prints_no_escape_sequences_or_control_characters():
    """Issue 18 item 11: whatever a message quotes (a model server, a page, an agent), `say` prints no
    terminal escape sequence (a title change, a cleared screen) and no control character; lines and
    tabs stay."""
    import io

    from rich.console import Console

    from harness.terminal import say

    buf = io.StringIO()
    say(Console(file=buf, force_terminal=True, width=200), "a\x1b]0;pwned\x07\x1b[2Jb\x1b[31mc\x1b[0m\x00\x9b\nd\te")
    assert buf.getvalue() == "abc\nd       e\n", repr(buf.getvalue())


def test_the_progress_line_says_a_model_without_prices_is_not_priced():
    """A cost of $0 for a model whose TOML gives no prices would be a figure that lies quietly."""
    from harness.runner.evaluate import cost_words

    assert cost_words(0.25, 2, 8) == "cost $0.2500 (projected $1.0000)"
    assert cost_words(0.0, 0, 8) == "cost $0.0000 (projected -)"
    assert cost_words(0.0, 2, 8, priced=False) == "cost not priced (no price_*_per_1k)"
