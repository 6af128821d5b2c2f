"""The sandbox image's tag is a hash of its build context: any real change rebuilds, nothing else does."""

import shutil
import time
from pathlib import Path

import pytest
from filelock import FileLock

from harness.fsutil import tree_hash
from harness.sandbox.docker import images
from harness.settings import settings
from tests.helpers.e2e import explain, harness


def test_image_tag_changes_with_any_file_of_the_build_context(tmp_path):
    src = tmp_path / "image"
    shutil.copytree(images.images_dir(), src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert (src / "sandbox" / "Dockerfile").is_file() and (src / "base" / "build.sh").is_file()
    before = tree_hash(src)
    assert before == tree_hash(images.images_dir())  # only relative paths and bytes count
    assert tree_hash(src) == before  # no change, same tag: the build is skipped

    # Python's caches (left by pip's compile step or a test importing sandboxd) never count.
    (src / "sandbox" / "__pycache__").mkdir()
    (src / "sandbox" / "__pycache__" / "sandboxd.cpython-311.pyc").write_bytes(b"\x00cache")
    (src / "base" / "stray.pyc").write_bytes(b"\x00cache")
    assert tree_hash(src) == before

    (src / "sandbox" / "requirements.txt").write_text("pandas\n")
    assert tree_hash(src) != before
    changed = tree_hash(src)
    (src / "sandbox" / "notes.txt").write_text("")  # a new file, even empty, counts
    assert tree_hash(src) != changed


def test_images_dir_is_the_top_level_context_unless_overridden(tmp_path, monkeypatch):
    settings.cache_clear()
    monkeypatch.delenv("HARNESS_IMAGES_DIR", raising=False)
    try:
        packaged = images.images_dir()  # an installed package's copy: tests/test_packaging.py
        assert packaged == Path(__file__).resolve().parents[1] / "images"
        # the sandbox's own contexts alone: another image's context (webproxy, gaia2) changing leaves its tag
        assert images.sandbox_tag() == f"harness-sandbox:{tree_hash(packaged / 'base')[:6]}" \
                                       f"{tree_hash(packaged / 'sandbox')[:6]}"
        assert images.named_tag("gaia2").endswith(images.sandbox_tag().split(":")[1])
        settings.cache_clear()
        monkeypatch.setenv("HARNESS_IMAGES_DIR", str(tmp_path))
        assert images.images_dir() == tmp_path
        # A benchmark's image is built on the sandbox's: a change of sandboxd alone is a new tag for it too (it
        # named the base's hash only, so a gaia2 image with the previous sandboxd was taken as it was).
        for part, text in (("base/build.sh", "b"), ("sandbox/sandboxd.py", "one"), ("gaia2/Dockerfile", "g")):
            (tmp_path / part).parent.mkdir(exist_ok=True)
            (tmp_path / part).write_text(text)
        before = images.named_tag("gaia2")
        (tmp_path / "sandbox" / "sandboxd.py").write_text("two")
        assert images.named_tag("gaia2") != before
    finally:
        monkeypatch.undo()
        settings.cache_clear()


@pytest.mark.docker
def test_an_image_present_is_taken_while_another_process_holds_the_engines_build_lock(tmp_path, image):
    """A build or a copy holds its engine's lock for minutes (~1.6 GB to a remote engine); one machine-wide
    lock made every run on this machine wait for it, even on an engine that had the image: in the suite, a
    one-instance run waited 98-151 s behind the remote-engine test's copy. The tag present is taken at
    once, and the lock is the engine's own (a copy to another engine takes another file)."""
    env = {"HARNESS_STATE_DIR": str(tmp_path / "state")}
    (tmp_path / "state").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_STATE_DIR", env["HARNESS_STATE_DIR"])
        settings.cache_clear()
        try:
            local = images.lock_path()
            patch.setenv("HARNESS_DOCKER_HOST", "tcp://192.0.2.1:2376")
            settings.cache_clear()
            remote = images.lock_path()
        finally:
            settings.cache_clear()
    assert local != remote and local.parent == remote.parent == tmp_path / "state"
    held = [FileLock(str(path)) for path in (local, remote, tmp_path / "state" / "images.lock")]
    for lock in held:
        lock.acquire(timeout=5)
    try:
        started = time.monotonic()
        proc = harness("images", "build", env=env, timeout=120)
        seconds = time.monotonic() - started
    finally:
        for lock in held:
            lock.release()
    assert proc.returncode == 0 and proc.stdout.strip() == image, explain(proc)
    assert seconds < 60, seconds  # it waited for the lock before (until the harness's own timeout)
