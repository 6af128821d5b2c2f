"""Helpers of the end-to-end tests (every test that runs the real CLI): one copy each, here.

`harness` runs the real CLI in a subprocess and waits for it, `start` starts it (its own session,
for tests that signal or kill it); `containers_of` finds the containers of the runs into one output
dir (run ids start with the dir's name), so sandboxes of other test sessions on the same engine are
neither counted nor touched. `replay_dataset` / `replay_instance` / `one_instance` write a dataset
and a [llm.rec] replay config; `run_replayed` runs one_instance. Waiting: tests/helpers/wait.py.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
FAKE_KEY_ENV = "FAKE_OPENAI_KEY"
FAKE_KEY = "sk-fake-e2e-0123456789"
# Six of the GAIA smoke set's 21 tasks for a run on another provider or engine (tests/test_run_e2e.py runs all 21 on
# the local engine): the four that browse the offline site, a spreadsheet, and one the replay model gets wrong.
SMOKE_SUBSET = {"9cb9fa0f-0690-58a0-b62a-5d6e05c663d0": True, "220e4558-9eb1-5246-b9e6-02823d126c41": True,
                "a9360975-2563-5f10-a1be-68dcb8e24b46": True, "186b065e-32f9-5511-b2ad-03adaac76864": True,
                "e2509efa-62fd-5994-b70b-e04e13ddc56c": True, "964d85c4-677b-56b1-946d-d39b4af02e50": False}


def _cli_env(env: dict | None) -> dict:
    return {**os.environ, "HARNESS_RETRY_BACKOFF": "0", FAKE_KEY_ENV: FAKE_KEY, **(env or {})}


def harness(*args, env: dict | None = None, timeout: float = 600, script: bool = False,
            cwd: Path | None = None, module: str = "harness") -> subprocess.CompletedProcess:
    """The CLI from the repository root (or `cwd`): `python -m harness` (or `python -m MODULE`, a wrapper
    that runs it: tests/faults/full_disk.py), or the installed `harness` script."""
    command = [str(Path(sys.executable).with_name("harness"))] if script else [sys.executable, "-m", module]
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd or REPO,
                          env=_cli_env(env))


def start(*args, env: dict | None = None, stdout=subprocess.PIPE, sigint_ignored: bool = False) -> subprocess.Popen:
    """`python -m harness ARGS` started, not waited for, in a session of its own (the test may signal
    its whole group); text stdout (or `stdout`) and stderr are pipes. `sigint_ignored`: started with
    SIGINT ignored, as a script's `harness run &` is (bash's `trap "" INT` is inherited through exec)."""
    argv = [sys.executable, "-m", "harness", *map(str, args)]
    if sigint_ignored:
        argv = ["bash", "-c", 'trap "" INT; exec "$@"', "bash", *argv]
    return subprocess.Popen(argv, cwd=REPO, env=_cli_env(env), stdout=stdout, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, explain(proc)


def explain(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-5000:]}"


def out_dir(tmp_path: Path, label: str = "r") -> Path:
    """A fresh output dir whose name (the run id's prefix) is unique to this test."""
    return tmp_path / f"{label}{secrets.token_hex(4)}"


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "output.jsonl").read_text().splitlines() if line.strip()]


def trace(out: Path, row: dict) -> list[dict]:
    return [json.loads(line) for line in (out / row["trace"]).read_text().splitlines() if line.strip()]


def web_responses(out: Path) -> dict[str, str]:
    """URL -> WARC-Harness-Instance of every response a --web-record run into `out` recorded (out/web/*.warc.gz)."""
    from warcio.archiveiterator import ArchiveIterator

    from harness.web.recorded import web_archives

    found = {}
    for archive in web_archives(out):
        with archive.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "response":
                    found[record.rec_headers.get_header("WARC-Target-URI")] = \
                        record.rec_headers.get_header("WARC-Harness-Instance")
    return found


def docker_ids(*filters: str) -> set[str]:
    args = ["docker", "ps", "-aq", "--no-trunc", "--filter", "label=harness.managed=1"]
    for f in filters:
        args += ["--filter", f]
    return set(subprocess.run(args, capture_output=True, text=True, check=True, timeout=30).stdout.split())


def containers_of(out: Path) -> list[str]:
    """Containers (any state) of runs into `out`: their run id starts with the dir's name."""
    prefix = out.name[:12] + "-"
    listing = subprocess.run(["docker", "ps", "-a", "--no-trunc", "--filter", "label=harness.managed=1",
                              "--format", '{{.ID}} {{.Label "harness.run_id"}}'],
                             capture_output=True, text=True, check=True, timeout=30).stdout
    return [line.split()[0] for line in listing.splitlines()
            if len(line.split()) == 2 and line.split()[1].startswith(prefix)]


def containers_created_between(instance_id: str, since: float, until: float, out: Path | None = None) -> list[str]:
    """Harness containers of this instance the engine created in [since, until] (its event log);
    with `out`, only those of runs into `out` (instance ids such as one_instance's are shared by
    tests that run at the same time)."""
    listing = subprocess.run(
        ["docker", "events", "--since", f"{since:.3f}", "--until", f"{until:.3f}",
         "--filter", "type=container", "--filter", "event=create", "--filter", "label=harness.managed=1",
         "--filter", f"label=harness.instance_id={instance_id}",
         "--format", '{{.ID}} {{index .Actor.Attributes "harness.run_id"}}'],
        capture_output=True, text=True, check=True, timeout=30).stdout
    found = [line.split() for line in listing.splitlines() if line.strip()]
    return [row[0] for row in found if out is None or (len(row) == 2 and row[1].startswith(out.name[:12] + "-"))]


def remove_leftovers(out: Path) -> list[str]:
    """Remove (and return) containers of runs into `out` that are still there: a test failure."""
    left = containers_of(out)
    if left:
        subprocess.run(["docker", "rm", "-f", "-v", *left], capture_output=True, timeout=60)
    return left


def replay_instance(folder: Path, instance_id: str, question: str, answer: str, turns: list[dict],
                    files: dict[str, str] | None = None) -> tuple[Path, Path]:
    """A one-instance jsonl dataset and a [llm.rec] replay config playing `turns` for it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in (files or {}).items():
        (folder / name).write_text(content)
    data = folder / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": instance_id, "question": question, "answer": answer,
                                "files": sorted(files or {}), "level": 1}) + "\n")
    replay = folder / "turns.jsonl"
    replay.write_text(json.dumps({"instance_id": instance_id, "turns": turns}) + "\n")
    config = folder / "replay.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    return data, config


def replay_dataset(folder: Path, instances: list[tuple[str, str, str]], turns_for) -> tuple[Path, Path]:
    """A jsonl dataset of (instance_id, question, answer) and a [llm.rec] replay config playing
    turns_for(instance_id) for each."""
    folder.mkdir(parents=True, exist_ok=True)
    data, replay = folder / "tasks.jsonl", folder / "turns.jsonl"
    data.write_text("".join(json.dumps({"instance_id": i, "question": q, "answer": a}) + "\n"
                            for i, q, a in instances))
    replay.write_text("".join(json.dumps({"instance_id": i, "turns": turns_for(i)}) + "\n" for i, _, _ in instances))
    config = folder / "replay.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    return data, config


# Turns that solve "What is 6*7?" (answer 42) in the sandbox, and turns that sleep there first.
SOLVE = [{"tool_calls": [{"name": "run_python", "arguments": {"code": "print(6*7)"}}]},
         {"content": "<solution>42</solution>"}]


def sleeping(seconds: float) -> list[dict]:
    return [{"tool_calls": [{"name": "run_shell", "arguments": {"command": f"sleep {seconds}"}}]},
            {"content": "<solution>42</solution>"}]


def dataset_42(folder: Path, ids: list[str], turns_for=lambda iid: SOLVE) -> tuple[Path, Path]:
    """Instances `ids` (question 6*7, answer 42) and a [llm.rec] replay config playing turns_for(id)."""
    return replay_dataset(folder, [(i, "What is 6*7?", "42") for i in ids], turns_for)


def lost_results(out: Path, ids: list[str]) -> int:
    """Selected instances without exactly one final row: no row at all, or a finished result twice."""
    got = rows(out) if (out / "output.jsonl").is_file() else []
    present = {r["instance_id"] for r in got}
    finished = [r["instance_id"] for r in got if r["status"] != "error"]
    return sum(i not in present or finished.count(i) > 1 for i in ids)


# One instance ("only one": the sum of column x of nums.csv, 6) and turns that solve it with pandas.
SUM = [{"tool_calls": [{"name": "run_python", "arguments": {
    "code": "import pandas as pd; print(pd.read_csv('nums.csv').x.sum())"}}]},
    {"content": "Done.\n<SOLUTION>\n6\n</Solution>"}]


def one_instance(tmp_path: Path, turns: list[dict], answer="6", files=None) -> tuple[Path, Path]:
    data = tmp_path / "data.jsonl"
    (tmp_path / "nums.csv").write_text("x\n1\n2\n3\n")
    data.write_text(json.dumps({"instance_id": "only one", "question": "Sum column x of nums.csv.",
                                "answer": answer, "files": files if files is not None else ["nums.csv"],
                                "level": 1}) + "\n")
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"instance_id": "only one", "turns": turns}) + "\n")
    config = tmp_path / "config.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    return data, config


def run_replayed(tmp_path: Path, turns: list[dict], *flags, env=None) -> tuple[subprocess.CompletedProcess, Path]:
    """`harness run` of one_instance() with these recorded turns into a fresh output dir."""
    data, config = one_instance(tmp_path, turns)
    out = out_dir(tmp_path)
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--output-dir", out, *flags,
                   env=env)
    return proc, out


def tasks_file(folder: Path, ids: list[str], question: str = "What is 6*7?", answer: str = "42") -> Path:
    """FOLDER/tasks.jsonl: one task per id, each the same question and answer."""
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps({"instance_id": iid, "question": question, "answer": answer}) + "\n"
                            for iid in ids))
    return path


def fake_config(path: Path, base_url: str, *, max_retries: int = 0, max_connections: int | str | None = None,
                timeout: float = 30, key_env: str = FAKE_KEY_ENV, prices: tuple[float, float] | None = None) -> Path:
    """A [llm.fake] section for tests/fakes/openai_server.py (model_info for the AutoGen client too);
    `prices`: (input, output) per 1k tokens."""
    cap = "" if max_connections is None else f"max_connections = {max_connections}\n"
    if prices is not None:
        cap += f"price_input_per_1k = {prices[0]}\nprice_output_per_1k = {prices[1]}\n"
    path.write_text(f"""
[llm.fake]
model = "fake-model-1"
base_url = "{base_url}"
api_key_env = "{key_env}"
max_retries = {max_retries}
timeout = {timeout}
{cap}
[llm.fake.model_info]
function_calling = true
vision = false
json_output = false
family = "unknown"
structured_output = false
""")
    return path
