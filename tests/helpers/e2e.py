"""Helpers of the end-to-end tests in test_plain_runner/test_user_sim/test_scoring_path/test_errors.

`harness` runs the real CLI in a subprocess; `containers_of` finds the containers of the runs
into one output dir (run ids start with the dir's name), so sandboxes of other test sessions on
the same engine are neither counted nor touched.
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


def harness(*args, env: dict | None = None, timeout: float = 300, script: bool = False,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI from the repository root (or `cwd`): `python -m harness`, or the installed `harness` script."""
    full_env = {**os.environ, "HARNESS_RETRY_BACKOFF": "0", FAKE_KEY_ENV: FAKE_KEY, **(env or {})}
    command = [str(Path(sys.executable).with_name("harness"))] if script else [sys.executable, "-m", "harness"]
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd or REPO,
                          env=full_env)


def explain(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-5000:]}"


def out_dir(tmp_path: Path, label: str = "r") -> Path:
    """A fresh output dir whose name (the run id's prefix) is unique to this test."""
    return tmp_path / f"{label}{secrets.token_hex(4)}"


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "output.jsonl").read_text().splitlines() if line.strip()]


def trace(out: Path, row: dict) -> list[dict]:
    return [json.loads(line) for line in (out / row["trace"]).read_text().splitlines() if line.strip()]


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


def containers_created_between(instance_id: str, since: float, until: float) -> list[str]:
    """Harness containers of this instance the engine created in [since, until] (its event log)."""
    out = subprocess.run(
        ["docker", "events", "--since", f"{since:.3f}", "--until", f"{until:.3f}",
         "--filter", "type=container", "--filter", "event=create", "--filter", "label=harness.managed=1",
         "--filter", f"label=harness.instance_id={instance_id}", "--format", "{{.ID}}"],
        capture_output=True, text=True, check=True, timeout=30).stdout
    return out.split()


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


def fake_config(path: Path, base_url: str, *, max_retries: int = 0, max_connections: int | str | None = None) -> Path:
    """A [llm.fake] section for tests/fakes/openai_server.py (model_info for the AutoGen client too)."""
    cap = "" if max_connections is None else f"max_connections = {max_connections}\n"
    path.write_text(f"""
[llm.fake]
model = "fake-model-1"
base_url = "{base_url}"
api_key_env = "{FAKE_KEY_ENV}"
max_retries = {max_retries}
timeout = 30
{cap}
[llm.fake.model_info]
function_calling = true
vision = false
json_output = false
family = "unknown"
structured_output = false
""")
    return path
