import shutil

from harness.images.build import tree_hash


def test_image_tag_changes_with_any_file_under_images(tmp_path):
    src = tmp_path / "images"
    shutil.copytree("images", src)
    before = tree_hash(src)
    assert tree_hash(src) == before  # no change, same tag: the build is skipped
    (src / "sandbox" / "requirements.txt").write_text("pandas\n")
    assert tree_hash(src) != before
