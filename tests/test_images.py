"""The sandbox image's tag is a hash of its build context: any real change rebuilds, nothing else does."""

import shutil
from pathlib import Path

from harness.fsutil import tree_hash
from harness.sandbox.docker import images
from harness.settings import settings


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
        assert images.sandbox_tag() == f"harness-sandbox:{tree_hash(packaged)}"
        settings.cache_clear()
        monkeypatch.setenv("HARNESS_IMAGES_DIR", str(tmp_path))
        assert images.images_dir() == tmp_path
    finally:
        monkeypatch.undo()
        settings.cache_clear()
