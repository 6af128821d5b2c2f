"""Issue 29 item 9 (Hub cache): a symlink in the Hugging Face cache that leaves the repository's blobs is refused.

Before, the mirror of a cached snapshot hard-linked whatever each entry resolved to, so a link planted in the
cache (to a key, a file elsewhere on the host) became a plain file of the dataset and was packed into the
sandbox; a local dataset's link out of its folder is refused. The cache is built in huggingface_hub's layout and
read by the real library, offline (tests/test_hub_datasets.py)."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.helpers.e2e import SOLVE, containers_of, explain, harness, no_traceback, out_dir
from tests.test_hub_datasets import REPO_ID, SHA_OLD, gaia_row, hub_cache, hub_env, parquet


@pytest.mark.docker
@pytest.mark.parametrize("planted", ["file outside", "another repository's blob"])
def test_a_link_out_of_the_repositorys_blobs_is_exit_2_and_nothing_is_mirrored(tmp_path, planted, reliability):
    canary = "canary-" + os.urandom(6).hex()
    outside = tmp_path / "home" / "secret.csv"
    outside.parent.mkdir()
    outside.write_text(f"x\n{canary}\n")
    if planted != "file outside":
        other = hub_cache(tmp_path / "hub", "someone/other", "3" * 40, {"secret.csv": outside.read_bytes()})
        outside = next((other / "blobs").iterdir())
    storage = hub_cache(tmp_path / "hub", REPO_ID, SHA_OLD, {
        "2023/validation/metadata.parquet": parquet([gaia_row("v-1", "42", file_name="numbers.csv")])})
    entry = storage / "snapshots" / SHA_OLD / "2023" / "validation" / "numbers.csv"
    entry.symlink_to(os.path.relpath(outside, entry.parent))
    replay = tmp_path / "turns.jsonl"
    replay.write_text('{"instance_id": "v-1", "turns": ' + json.dumps(SOLVE) + "}\n")
    config = tmp_path / "replay.toml"
    config.write_text(f'[llm.rec]\nkind = "replay"\npath = "{replay}"\n')
    out = out_dir(tmp_path)
    started = time.monotonic()
    proc = harness("run", "--dataset", f"hf://{REPO_ID}@{SHA_OLD}", "--split", "validation", "--model", "rec",
                   "--config", config, "--output-dir", out, env=hub_env(tmp_path))
    seconds = time.monotonic() - started
    assert proc.returncode == 2, explain(proc)
    assert f"{entry} in the Hub cache is a symlink to {outside.resolve()}" in proc.stderr, explain(proc)
    no_traceback(proc)
    mirrored = [p for p in (tmp_path / "state").rglob("*") if p.is_file() and canary.encode() in p.read_bytes()]
    assert mirrored == [] and containers_of(out) == [] and not (out / "output.jsonl").exists()
    reliability.record(f"Hub cache entry linked to a {planted}", "exit 2 naming the entry, nothing mirrored",
                       seconds=seconds)
