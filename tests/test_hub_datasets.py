"""`--dataset hf://OWNER/NAME[@REVISION]`: the real huggingface_hub code path against a cache this test
builds in the library's layout (datasets--OWNER--NAME/refs, snapshots/<sha>/..., blobs), offline, and
against a local server answering as the Hub does for a gated or missing repository (HF_ENDPOINT)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.e2e import SOLVE, containers_of, explain, harness, no_traceback, out_dir, rows

SHA_OLD = "1" * 40
SHA_NEW = "2" * 40
REPO_ID = "gaia-benchmark/GAIA"


def hub_cache(cache: Path, repo_id: str, sha: str, files: dict[str, bytes], ref: str | None = "main") -> Path:
    """Commit `sha` of dataset `repo_id` in the Hub cache `cache` as huggingface_hub lays it out: each
    file a blob named by its hash, the snapshot's entry a relative symlink to it; `ref` points at it."""
    storage = cache / ("datasets--" + repo_id.replace("/", "--"))
    for name, content in files.items():
        blob = storage / "blobs" / hashlib.sha256(content).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(content)
        entry = storage / "snapshots" / sha / name
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.symlink_to(os.path.relpath(blob, entry.parent))
    if ref is not None:
        (storage / "refs").mkdir(parents=True, exist_ok=True)
        (storage / "refs" / ref).write_text(sha)  # the library writes the sha without a newline
    return storage


def parquet(records: list[dict]) -> bytes:
    buffer = io.BytesIO()
    pd.DataFrame(records).to_parquet(buffer)
    return buffer.getvalue()


def gaia_row(task_id: str, answer: str, file_name: str = "", level: int = 1) -> dict:
    return {"task_id": task_id, "Question": "What is 6*7?", "Level": level, "Final answer": answer,
            "file_name": file_name, "Annotator Metadata": {"Steps": "1. multiply", "Tools": "1. python"}}


def hub_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The library's variables pointed at this test's folders: its cache, its home (no saved token),
    offline unless said otherwise; the harness's state (the mirror) in the test's folder too."""
    env = {"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1",
           "HARNESS_STATE_DIR": str(tmp_path / "state"), "HF_HUB_DISABLE_TELEMETRY": "1", "HF_TOKEN": ""}
    env.update(extra)
    return env


def load(tmp_path: Path, reference: str, split: str | None = "validation", **env: str):
    """load_dataset(reference) in a fresh interpreter (the library reads its variables at import)."""
    import subprocess
    import sys

    code = ("import json, sys; from harness.datasets import load_dataset; from harness.errors import InputError\n"
            "try:\n    d = load_dataset(sys.argv[1], sys.argv[2] or None)\n"
            "except InputError as e:\n    print(json.dumps({'error': str(e)})); sys.exit(0)\n"
            "print(json.dumps({'revision': d.revision, 'fingerprint': d.fingerprint, 'instances': "
            "[{'id': i.instance_id, 'answer': i.answer, 'level': i.level, 'files': i.files, 'root': str(i.root)} "
            "for i in d.instances]}))")
    proc = subprocess.run([sys.executable, "-c", code, reference, split or ""], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **hub_env(tmp_path, **env)},
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def gaia_commit(tmp_path: Path, sha: str, answers: dict[str, str], ref: str | None = "main") -> None:
    rows_ = [gaia_row(task, answer, file_name="numbers.csv" if n == 0 else "") for n, (task, answer)
             in enumerate(answers.items())]
    hub_cache(tmp_path / "hub", REPO_ID, sha, {
        "README.md": b"---\nextra_gated_prompt: terms\n---\n",
        "2023/validation/metadata.parquet": parquet(rows_),
        "2023/validation/numbers.csv": b"x\n1\n2\n",
        "2023/test/metadata.parquet": parquet([gaia_row("t-1", "?")]),
    }, ref=ref)


def test_a_hub_dataset_is_read_from_the_cache_offline_at_its_resolved_commit(tmp_path):
    gaia_commit(tmp_path, SHA_OLD, {"v-1": "42", "v-2": "7"})
    got = load(tmp_path, f"hf://{REPO_ID}")
    assert got["revision"] == SHA_OLD, got  # main resolved through refs/main
    assert sorted(i["id"] for i in got["instances"]) == ["v-1", "v-2"]  # the split asked for, not test
    first = next(i for i in got["instances"] if i["id"] == "v-1")
    assert first["files"] == ["numbers.csv"] and first["answer"] == "42" and first["level"] == 1
    attachment = Path(first["root"]) / "numbers.csv"  # a plain file (the packer follows no link out)
    assert not attachment.is_symlink() and attachment.read_bytes() == b"x\n1\n2\n"
    assert Path(first["root"]).resolve().is_relative_to((tmp_path / "state").resolve())
    pinned = load(tmp_path, f"hf:/{REPO_ID}@{SHA_OLD}")  # pathlib's folded form of the scheme reads too
    assert pinned["revision"] == SHA_OLD and pinned["fingerprint"] == got["fingerprint"]


def test_an_older_revision_with_metadata_jsonl_is_read_at_the_sha_given(tmp_path):
    gaia_commit(tmp_path, SHA_NEW, {"v-1": "42"})
    jsonl = "".join(json.dumps(gaia_row(t, a)) + "\n" for t, a in (("old-1", "1"), ("old-2", "2"))).encode()
    hub_cache(tmp_path / "hub", REPO_ID, SHA_OLD, {"2023/validation/metadata.jsonl": jsonl}, ref=None)
    got = load(tmp_path, f"hf://{REPO_ID}@{SHA_OLD}")
    assert got["revision"] == SHA_OLD and sorted(i["id"] for i in got["instances"]) == ["old-1", "old-2"]


def test_offline_without_a_cached_copy_is_an_input_error_that_says_so(tmp_path):
    got = load(tmp_path, f"hf://{REPO_ID}@{SHA_OLD}")
    assert "HF_HUB_OFFLINE is set" in got["error"] and "holds no complete copy" in got["error"], got
    assert str(tmp_path / "hub") in got["error"]
    proc = harness("run", "--dataset", f"hf://{REPO_ID}", "--split", "validation", "--model", "replay",
                   "--output-dir", out_dir(tmp_path), env=hub_env(tmp_path))
    assert proc.returncode == 2 and "HF_HUB_OFFLINE is set" in proc.stderr, explain(proc)
    no_traceback(proc)


def test_a_malformed_reference_is_refused_naming_the_flag(tmp_path):
    proc = harness("run", "--dataset", "hf://GAIA", "--model", "replay", "--output-dir", out_dir(tmp_path),
                   env=hub_env(tmp_path))
    assert proc.returncode == 2 and "--dataset hf://GAIA:" in proc.stderr and "hf://OWNER/NAME" in proc.stderr, \
        explain(proc)


class FakeHub(http.server.BaseHTTPRequestHandler):
    """Answers every API call as the Hub answers for `answer`: (status, X-Error-Code)."""

    answer: tuple[int, str] = (404, "RepoNotFound")
    seen: list[tuple[str, str | None]] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).seen.append((self.path, self.headers.get("authorization")))
        status, code = type(self).answer
        body = json.dumps({"error": code}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", "Access to this dataset is restricted" if code == "GatedRepo" else code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_hub() -> Iterator[tuple[str, type[FakeHub]]]:
    handler = type("Hub", (FakeHub,), {"seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("answer", "token", "expected"), [
    ((401, "GatedRepo"), "", "the repository is gated and no Hugging Face token is set"),
    ((403, "GatedRepo"), "hf_faketoken0123456789", "the token in use (HF_TOKEN or the saved login) has no access"),
    ((401, "RepoNotFound"), "", "no dataset repository 'gaia-benchmark/GAIA' on the Hub"),
    ((404, "RevisionNotFound"), "", "the repository has no revision 'v9'"),
])
def test_the_hubs_refusals_are_input_errors_that_say_which(tmp_path, fake_hub, answer, token, expected):
    endpoint, handler = fake_hub
    handler.answer = answer
    got = load(tmp_path, f"hf://{REPO_ID}@v9", HF_HUB_OFFLINE="0", HF_ENDPOINT=endpoint, HF_TOKEN=token)
    assert expected in got.get("error", ""), got
    assert f"HTTP {answer[0]}" in got["error"]
    assert handler.seen and handler.seen[0][0].startswith(f"/api/datasets/{REPO_ID}/revision/v9")
    assert (handler.seen[0][1] == f"Bearer {token}") if token else handler.seen[0][1] is None


@pytest.mark.docker
def test_a_run_from_the_hub_cache_records_the_commit_and_refuses_a_moved_main(tmp_path):
    gaia_commit(tmp_path, SHA_OLD, {"v-1": "42", "v-2": "42"})
    replay = tmp_path / "turns.jsonl"
    replay.write_text("".join(json.dumps({"instance_id": i, "turns": SOLVE}) + "\n" for i in ("v-1", "v-2")))
    config = tmp_path / "replay.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    out = out_dir(tmp_path)
    args = ("run", "--dataset", f"hf://{REPO_ID}", "--split", "validation", "--model", "rec", "--config", config,
            "--output-dir", out)
    proc = harness(*args, env=hub_env(tmp_path))
    assert proc.returncode == 0, explain(proc)
    assert sorted((r["instance_id"], r["correct"]) for r in rows(out)) == [("v-1", True), ("v-2", True)]
    run = json.loads((out / "run.json").read_text())
    assert run["dataset"] == f"hf://{REPO_ID}" and run["dataset_revision"] == SHA_OLD
    assert containers_of(out) == []

    gaia_commit(tmp_path, SHA_NEW, {"v-1": "42", "v-2": "42"})  # main moved (same rows: the sha alone differs)
    moved = harness(*args, env=hub_env(tmp_path))
    assert moved.returncode == 2, explain(moved)
    assert f"dataset_revision changed ({SHA_OLD} -> {SHA_NEW})" in moved.stderr
    pinned = harness(*args[:2], f"hf://{REPO_ID}@{SHA_OLD}", *args[3:], env=hub_env(tmp_path))
    assert pinned.returncode == 0 and "2 instance(s) already finished, 0 to run" in pinned.stderr, explain(pinned)


@pytest.mark.docker
def test_the_hub_token_stays_on_the_host(tmp_path):
    """Secret canary for HF_TOKEN: a run of a Hub dataset with a token set looks for it inside the
    sandbox (its environment, /workspace, /tmp, every process's environ) and finds it nowhere there,
    nor in any file of the run directory (run.json, rows, traces, report)."""
    canary = "hf_canary" + os.urandom(8).hex()
    gaia_commit(tmp_path, SHA_OLD, {"v-1": "42"})
    look = ("env; cat /proc/1/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n'; "
            "grep -rsl " + canary[:16] + " /workspace /tmp /proc/*/environ 2>/dev/null; echo done")
    turns = [{"tool_calls": [{"name": "run_shell", "arguments": {"command": look}}]}, *SOLVE]
    replay = tmp_path / "turns.jsonl"
    replay.write_text(json.dumps({"instance_id": "v-1", "turns": turns}) + "\n")
    config = tmp_path / "replay.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    out = out_dir(tmp_path)
    proc = harness("run", "--dataset", f"hf://{REPO_ID}", "--split", "validation", "--model", "rec",
                   "--config", config, "--output-dir", out, env=hub_env(tmp_path, HF_TOKEN=canary))
    assert proc.returncode == 0, explain(proc)
    (row,) = rows(out)
    assert row["correct"] is True, row
    events = [json.loads(line) for line in (out / row["trace"]).read_text().splitlines() if line.strip()]
    shown = "\n".join(str(e.get("content", "")) for e in events if e["type"] == "tool_result")
    assert "HOSTNAME=" in shown and "done" in shown, shown  # the look ran in the sandbox
    assert canary[:16] not in shown
    leaked = [p.relative_to(out) for p in out.rglob("*") if p.is_file() and canary.encode() in p.read_bytes()]
    assert leaked == [] and canary not in proc.stdout + proc.stderr
    assert containers_of(out) == []
