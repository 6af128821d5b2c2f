"""Issue 29 item 9 (recordings): a damaged web archive or search index is exit 2 naming the file, before any container.

Before, `--web-replay` of a WARC cut in half served its first half and answered the rest with misses; one with
flipped bytes stopped the replay proxy with warcio's traceback (exit 1); a damaged `site` search index was
searched as it was. The recording here is written by the harness's own writers (the search recorder's WARC
exchanges, build_index's bm25s index), then damaged as a disk or a copy would."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from harness.environments.websearch.site import build_index, index_problem
from harness.web.archives import archive_problem
from harness.web.recorded import SITE_INDEX
from harness.web.search_archive import SEARCH_ARCHIVE, SearchRecorder
from tests.helpers.e2e import containers_of, explain, harness, out_dir, replay_dataset

PAGES = [{"url": f"http://shop.test/p{i}", "title": f"Page {i}", "text": f"teak bench number {i} " * 60}
         for i in range(12)]


def recorded(folder: Path) -> Path:
    """A recorded run's web/ folder: 12 search exchanges and a site index, as a --web-record run leaves them."""
    web = folder / "web"
    recorder = SearchRecorder(web / SEARCH_ARCHIVE, "q0/1", None)
    for i in range(12):
        request = httpx.Request("POST", "https://search.test/search", json={"query": f"teak {i}"})
        found = {"results": [{"title": f"T{i}", "url": f"http://shop.test/p{i}", "content": "x" * (100 + 37 * i)}]}
        recorder.record(request, httpx.Response(200, json=found), time.time(), time.time())  # sizes differ: a cut
        # at half the file lands inside a record, not between two exchanges
    build_index(PAGES, web / SITE_INDEX)
    return web


def _cut_half(web: Path) -> Path:
    path = web / SEARCH_ARCHIVE
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


def _flip(path: Path, at: float = 0.5, width: int = 4) -> Path:
    data = bytearray(path.read_bytes())
    for i in range(int(len(data) * at), int(len(data) * at) + width):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def _flip_record(path: Path, index: int = 12) -> Path:
    """Flip 4 bytes in the middle of one record's gzip member: in its compressed data, where its CRC sees
    them (a flip at half the file once landed in a member's header, whose time stamp gzip does not check:
    1 run in 10, as the records' time stamps move the members)."""
    from warcio.archiveiterator import ArchiveIterator

    with path.open("rb") as fh:
        records = ArchiveIterator(fh)
        offsets = [records.get_record_offset() for _ in records]
    return _flip(path, (offsets[index] + offsets[index + 1]) / 2 / path.stat().st_size)


def _cut_before_last_response(web: Path) -> Path:
    from warcio.archiveiterator import ArchiveIterator

    path = web / SEARCH_ARCHIVE
    with path.open("rb") as fh:
        records = ArchiveIterator(fh)
        offsets = [records.get_record_offset() for _ in records]
    path.write_bytes(path.read_bytes()[: offsets[-1]])  # the last exchange's request kept, its response gone
    return path


def _truncate_passages(web: Path) -> Path:
    path = web / SITE_INDEX / "passages.json"
    path.write_text(path.read_text()[:-200])
    return path


def _old_index_truncated(web: Path) -> Path:
    (web / SITE_INDEX / "manifest.json").unlink()  # an index saved before the manifest: loaded to check it
    return _truncate_passages(web)


DAMAGE = {
    "warc cut in half": (_cut_half, "is cut short: it ends inside a record, after 12 whole record(s)"),
    "warc flipped bytes": (lambda web: _flip_record(web / SEARCH_ARCHIVE), "is damaged: record 13 is not a WARC "
                                                                           "record"),
    "warc cut between request and response": (_cut_before_last_response, "its last request (record 23) has no "
                                                                         "response"),
    "index flipped bytes": (lambda web: _flip(web / SITE_INDEX / "data.csc.index.npy", 0.9, 2),
                            "is damaged: its SHA-256 is not the one manifest.json recorded"),
    "index passages cut": (_truncate_passages, "is damaged: its SHA-256"),
    "index file missing": (lambda web: (p := web / SITE_INDEX / "vocab.index.json").unlink() or p, "is missing"),
    "old index passages cut": (_old_index_truncated, "passages.json cannot be read (JSONDecodeError"),
}


def test_an_intact_recording_passes_and_each_check_names_the_damage(tmp_path):
    web = recorded(tmp_path / "rec")
    assert archive_problem(web / SEARCH_ARCHIVE) is None and index_problem(web / SITE_INDEX) is None
    (tmp_path / "empty.warc.gz").write_bytes(b"")  # a recording run that made no exchange
    assert archive_problem(tmp_path / "empty.warc.gz") is None


@pytest.mark.docker
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_recording_is_exit_2_naming_the_file_before_any_container(tmp_path, damage, reliability):
    damaged, said = DAMAGE[damage]
    web = recorded(tmp_path / "rec")
    path = damaged(web)
    data, config = replay_dataset(tmp_path / "data", [("q0", "What is 0?", "0")],
                                  lambda iid: [{"content": "<solution>0</solution>"}])
    out = out_dir(tmp_path)
    started = time.monotonic()
    proc = harness("run", "--dataset", data, "--model", "rec", "--config", config, "--web-replay", tmp_path / "rec",
                   "--output-dir", out, timeout=300)
    seconds = time.monotonic() - started
    assert proc.returncode == 2, explain(proc)
    assert str(path) in proc.stderr and said in proc.stderr, explain(proc)
    assert "Traceback" not in proc.stderr + proc.stdout, explain(proc)
    assert containers_of(out) == [] and not (out / "output.jsonl").exists()
    reliability.record(f"--web-replay of a recording with its {damage}", "exit 2 naming the file, no container",
                       seconds=seconds)
