"""Dataset loading, validation, selection and fingerprinting (pure, no Docker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.datasets import Instance, dataset_fingerprint, load_dataset, select
from harness.errors import InputError

SMOKE = Path(__file__).resolve().parent.parent / "datasets" / "gaia-smoke"

GAIA_ROWS = [
    {"task_id": "t1", "Question": "What is 2+2?", "Level": 1, "Final answer": "4", "file_name": "",
     "Annotator Metadata": {"Steps": "add", "Number of steps": "1"}},
    {"task_id": "t2", "Question": "Sum the sheet.", "Level": 2, "Final answer": "17", "file_name": "data.csv",
     "Annotator Metadata": {"Steps": "sum", "Number of steps": "2"}},
    {"task_id": "t3", "Question": "Hidden answer?", "Level": 3, "Final answer": "?", "file_name": None,
     "Annotator Metadata": None},
]


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def gaia_split(folder: Path, rows: list[dict] = GAIA_ROWS, fmt: str = "jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.csv").write_text("x\n1\n16\n")
    if fmt == "jsonl":
        write_jsonl(folder / "metadata.jsonl", rows)
    else:
        pd.DataFrame(rows).to_parquet(folder / "metadata.parquet")
    return folder


def message(excinfo: pytest.ExceptionInfo) -> str:
    return str(excinfo.value)


# --- GAIA layout ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_gaia_folder(tmp_path: Path, fmt: str) -> None:
    folder = gaia_split(tmp_path / "2023" / "validation", fmt=fmt)
    instances = load_dataset(folder).instances
    assert [i.instance_id for i in instances] == ["t1", "t2", "t3"]
    t1, t2, t3 = instances
    assert (t1.question, t1.answer, t1.level, t1.files) == ("What is 2+2?", "4", 1, [])
    assert (t2.answer, t2.level, t2.files) == ("17", 2, ["data.csv"])
    assert (t3.answer, t3.files) == ("?", [])
    assert t1.root == folder.resolve()
    assert t1.metadata == {"Annotator Metadata": {"Steps": "add", "Number of steps": "1"}}
    assert t3.metadata == {"Annotator Metadata": None}
    json.dumps([i.metadata for i in instances])  # JSON-safe


def test_gaia_parquet_json_safe_metadata(tmp_path: Path) -> None:
    rows = [dict(r, Extra=float("nan") if i else 2.5, Tags=["a", "b"]) for i, r in enumerate(GAIA_ROWS)]
    rows[0]["Final answer"] = None
    instances = load_dataset(gaia_split(tmp_path / "s", rows, fmt="parquet")).instances
    assert instances[0].answer is None
    assert instances[0].metadata["Extra"] == 2.5 and instances[1].metadata["Extra"] is None
    assert instances[0].metadata["Tags"] == ["a", "b"]
    json.dumps([i.metadata for i in instances], allow_nan=False)


def test_gaia_metadata_file_given_directly(tmp_path: Path) -> None:
    folder = gaia_split(tmp_path / "2023" / "validation")
    assert len(load_dataset(folder / "metadata.jsonl").instances) == 3


def test_root_and_split_resolution(tmp_path: Path) -> None:
    gaia_split(tmp_path / "2023" / "validation")
    assert len(load_dataset(tmp_path).instances) == 3  # only one split: used
    assert len(load_dataset(tmp_path, split="validation").instances) == 3
    gaia_split(tmp_path / "2023" / "test", GAIA_ROWS[:1], fmt="parquet")
    assert len(load_dataset(tmp_path, split="test").instances) == 1
    with pytest.raises(InputError) as excinfo:
        load_dataset(tmp_path)
    assert "test" in message(excinfo) and "validation" in message(excinfo)
    with pytest.raises(InputError) as excinfo:
        load_dataset(tmp_path, split="train")
    assert "'train'" in message(excinfo) and "test, validation" in message(excinfo)
    with pytest.raises(InputError, match="holds split 'validation'"):
        load_dataset(tmp_path / "2023" / "validation", split="test")


def test_folder_without_metadata(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no metadata"):
        load_dataset(tmp_path)


# --- plain form ---------------------------------------------------------------------------------------

def test_plain_jsonl(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "c.txt").write_text("c")
    path = write_jsonl(tmp_path / "ds.jsonl", [
        {"instance_id": "x1", "question": "q1", "answer": "a1", "files": ["a.txt", "b.txt"], "level": "2"},
        {"instance_id": "x2", "question": "q2", "answer": 42, "files": "dir", "source": "web"},
        {"instance_id": "x3", "question": "q3", "answer": None},
        {"instance_id": "x4", "question": "q4", "answer": "a4", "files": None, "level": None},
    ])
    x1, x2, x3, x4 = load_dataset(path).instances
    assert (x1.files, x1.level, x1.answer) == (["a.txt", "b.txt"], 2, "a1")
    assert (x2.files, x2.answer, x2.metadata["source"]) == (["dir"], "42", "web")
    assert (x3.files, x3.answer, x3.level) == ([], None, None)
    assert x4.files == [] and x1.root == tmp_path.resolve()


def test_plain_csv(tmp_path: Path) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text(name)
    pd.DataFrame([
        {"instance_id": "c1", "question": "q1", "answer": "1", "files": "a.txt; b.txt", "level": "1", "note": "n"},
        {"instance_id": "c2", "question": "q2", "answer": "", "files": '["c.txt"]', "level": "", "note": ""},
        {"instance_id": "c3", "question": "q3", "answer": "007", "files": "", "level": "3", "note": "x"},
    ]).to_csv(tmp_path / "ds.csv", index=False)
    c1, c2, c3 = load_dataset(tmp_path / "ds.csv").instances
    assert (c1.files, c1.level, c1.answer, c1.metadata) == (["a.txt", "b.txt"], 1, "1", {"note": "n"})
    assert (c2.files, c2.level, c2.answer) == (["c.txt"], None, None)
    assert (c3.files, c3.answer) == ([], "007")  # answers stay text


# --- validation ---------------------------------------------------------------------------------------

def plain(tmp_path: Path, rows: list[dict | str]) -> Path:
    return write_jsonl(tmp_path / "ds.jsonl", rows)


def row(i: str, **extra: object) -> dict:
    return {"instance_id": i, "question": f"question {i}", "answer": "a", **extra}


def test_missing_column(tmp_path: Path) -> None:
    path = plain(tmp_path, [{"instance_id": "a", "answer": "x"}])
    with pytest.raises(InputError) as excinfo:
        load_dataset(path)
    assert "'question'" in message(excinfo) and str(path) in message(excinfo)
    folder = gaia_split(tmp_path / "g", [{"task_id": "t", "Question": "q", "Level": 1}])
    with pytest.raises(InputError, match="'Final answer'"):
        load_dataset(folder)


def test_duplicate_and_empty_ids(tmp_path: Path) -> None:
    path = plain(tmp_path, [row("a"), row("b"), row("a"), row("")])
    with pytest.raises(InputError) as excinfo:
        load_dataset(path)
    text = message(excinfo)
    assert "line 3: duplicate id 'a' (first at line 1)" in text
    assert "line 4: empty 'instance_id'" in text


def test_empty_question(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"line 1 \(id 'a'\): empty 'question'"):
        load_dataset(plain(tmp_path, [dict(row("a"), question="  ")]))


def test_missing_attachment(tmp_path: Path) -> None:
    path = plain(tmp_path, [row("a"), row("b", files=["gone.pdf"])])
    with pytest.raises(InputError) as excinfo:
        load_dataset(path)
    text = message(excinfo)
    assert "line 2 (id 'b')" in text and "'gone.pdf'" in text and str(tmp_path / "gone.pdf") in text


def test_bad_json_line(tmp_path: Path) -> None:
    path = plain(tmp_path, [row("a"), "{not json", row("b"), "[1, 2]"])
    with pytest.raises(InputError) as excinfo:
        load_dataset(path)
    assert "line 2: invalid JSON" in message(excinfo)
    assert "line 4: expected a JSON object" in message(excinfo)


@pytest.mark.parametrize("name, fragment", [("/etc/passwd", "relative path"), ("../secret", "'..'"),
                                            ("sub/../../x", "'..'")])
def test_unsafe_file_names(tmp_path: Path, name: str, fragment: str) -> None:
    with pytest.raises(InputError) as excinfo:
        load_dataset(plain(tmp_path, [row("a", files=[name])]))
    assert "line 1 (id 'a')" in message(excinfo) and fragment in message(excinfo)


def test_bad_level(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"line 2 \(id 'b'\): 'level' 'hard' is not an integer"):
        load_dataset(plain(tmp_path, [row("a", level=1), row("b", level="hard")]))
    folder = gaia_split(tmp_path / "g", [dict(GAIA_ROWS[0], Level=1.5)])
    with pytest.raises(InputError, match="'Level' 1.5 is not an integer"):
        load_dataset(folder)


def test_bad_files_value(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"line 1 \(id 'a'\): files must be a list"):
        load_dataset(plain(tmp_path, [row("a", files=[1, 2])]))


def test_all_problems_reported_at_once(tmp_path: Path) -> None:
    rows: list[dict | str] = [row("a", files=["missing.txt"]), row("a"), "oops", row("c", level="x")]
    rows += [row(f"m{i}", files=["nope"]) for i in range(30)]
    with pytest.raises(InputError) as excinfo:
        load_dataset(plain(tmp_path, rows))
    text = message(excinfo)
    assert "34 problem(s)" in text and "and 14 more" in text
    assert "line 1" in text and "line 2" in text and "line 3" in text and "line 4" in text


def test_unreadable_attachment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secret.txt").write_text("s")
    real_access = os.access
    monkeypatch.setattr("harness.datasets.attachments.os.access",
                        lambda p, mode: Path(p).name != "secret.txt" and real_access(p, mode))
    with pytest.raises(InputError, match=r"line 1 \(id 'a'\): attachment 'secret.txt' .* not readable"):
        load_dataset(plain(tmp_path, [row("a", files=["secret.txt"])]))


def test_attachment_symlink_outside_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("o")
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "link.txt").symlink_to(outside)
    with pytest.raises(InputError, match="points outside"):
        load_dataset(write_jsonl(tmp_path / "ds" / "x.jsonl", [row("a", files=["link.txt"])]))


def folder_attachment(tmp_path: Path) -> Path:
    """A dataset folder `ds` holding attachment folder `dir` (with `ok.txt` and `sub/`)."""
    (tmp_path / "ds" / "dir" / "sub").mkdir(parents=True)
    (tmp_path / "ds" / "dir" / "ok.txt").write_text("ok")
    return tmp_path / "ds"


def test_folder_attachment_with_fifo(tmp_path: Path) -> None:
    ds = folder_attachment(tmp_path)
    os.mkfifo(ds / "dir" / "sub" / "pipe")
    with pytest.raises(InputError) as excinfo:
        load_dataset(write_jsonl(ds / "x.jsonl", [row("a"), row("b", files=["dir"])]))
    text = message(excinfo)
    assert "1 problem(s)" in text
    assert "line 2 (id 'b'): attachment 'dir': 'dir/sub/pipe'" in text
    assert "not a regular file or folder" in text


def test_folder_attachment_with_escaping_symlink(tmp_path: Path) -> None:
    ds = folder_attachment(tmp_path)
    (tmp_path / "outside.txt").write_text("o")
    (ds / "dir" / "sub" / "link.txt").symlink_to(tmp_path / "outside.txt")
    (ds / "dir" / "inside.txt").symlink_to(ds / "dir" / "ok.txt")  # inside the root: fine
    with pytest.raises(InputError) as excinfo:
        load_dataset(write_jsonl(ds / "x.jsonl", [row("a", files=["dir"])]))
    text = message(excinfo)
    assert "1 problem(s)" in text
    assert "line 1 (id 'a'): attachment 'dir': 'dir/sub/link.txt' points outside" in text
    assert str(tmp_path / "outside.txt") in text


def test_folder_attachment_with_unreadable_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = folder_attachment(tmp_path)
    (ds / "dir" / "sub" / "secret.txt").write_text("s")
    real_access = os.access
    monkeypatch.setattr("harness.datasets.attachments.os.access",
                        lambda p, mode: Path(p).name not in ("secret.txt", "sub") and real_access(p, mode))
    with pytest.raises(InputError) as excinfo:
        load_dataset(write_jsonl(ds / "x.jsonl", [row("a", files=["dir"])]))
    text = message(excinfo)
    assert "2 problem(s)" in text
    assert "line 1 (id 'a'): attachment 'dir': 'dir/sub/secret.txt'" in text
    assert "line 1 (id 'a'): attachment 'dir': 'dir/sub' at" in text and "not readable" in text


def test_valid_folder_attachment_with_inner_symlink(tmp_path: Path) -> None:
    ds = folder_attachment(tmp_path)
    (ds / "dir" / "sub" / "again.txt").symlink_to(ds / "dir" / "ok.txt")
    (inst,) = load_dataset(write_jsonl(ds / "x.jsonl", [row("a", files=["dir"])])).instances
    assert inst.files == ["dir"]


def test_attachments_over_the_per_instance_limit_are_refused_naming_the_file(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.sandbox.files.MAX_ARCHIVE_BYTES", 64 * 1024)
    (tmp_path / "small.txt").write_text("s" * 1000)
    (tmp_path / "big.bin").write_bytes(b"b" * 70 * 1024)
    (tmp_path / "dir").mkdir()
    for i in range(4):
        (tmp_path / "dir" / f"part{i}.bin").write_bytes(b"p" * 20 * 1024)
    with pytest.raises(InputError) as excinfo:
        load_dataset(plain(tmp_path, [row("a", files=["small.txt"]), row("b", files=["small.txt", "big.bin"]),
                                      row("c", files=["dir"])]))
    text = message(excinfo)
    assert "2 problem(s)" in text and "line 1" not in text
    assert "line 2 (id 'b'): attachments pack to" in text and "'big.bin' (70.0 KiB)" in text
    assert "line 3 (id 'c'): attachments pack to" in text and "'dir' (80.0 KiB" in text
    assert "over the limit of 65536 bytes" in text


def test_attachments_just_under_the_limit_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.sandbox.files import archive_size

    (tmp_path / "f.bin").write_bytes(b"f" * 5000)
    exact = archive_size(tmp_path, ["f.bin"])
    monkeypatch.setattr("harness.sandbox.files.MAX_ARCHIVE_BYTES", exact)
    (inst,) = load_dataset(plain(tmp_path, [row("a", files=["f.bin"])])).instances
    assert inst.files == ["f.bin"]
    monkeypatch.setattr("harness.sandbox.files.MAX_ARCHIVE_BYTES", exact - 1)
    with pytest.raises(InputError, match="'f.bin'"):
        load_dataset(plain(tmp_path, [row("a", files=["f.bin"])]))


def test_nonexistent_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_dataset(tmp_path / "nope.jsonl")


def test_unknown_extension(tmp_path: Path) -> None:
    (tmp_path / "ds.xml").write_text("<x/>")
    with pytest.raises(InputError, match=r"unknown extension '\.xml'"):
        load_dataset(tmp_path / "ds.xml")


def test_unreadable_csv(tmp_path: Path) -> None:
    (tmp_path / "ds.csv").write_text("")
    with pytest.raises(InputError, match="could not be read"):
        load_dataset(tmp_path / "ds.csv")


def test_split_with_plain_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--split"):
        load_dataset(plain(tmp_path, [row("a")]), split="validation")


# --- selection ----------------------------------------------------------------------------------------

def make(n: int) -> list[Instance]:
    return [Instance(instance_id=f"i{k}", question=f"q{k}", root=Path("/tmp")) for k in range(n)]


def ids_of(instances: list[Instance]) -> list[str]:
    return [i.instance_id for i in instances]


def test_select_ids_and_skip() -> None:
    pool = make(5)
    assert ids_of(select(pool, ids=["i3", "i1"])) == ["i1", "i3"]  # dataset order kept
    assert ids_of(select(pool, skip=["i0", "i4"])) == ["i1", "i2", "i3"]
    assert ids_of(select(pool, ids=["i1", "i2"], skip=["i2"])) == ["i1"]
    with pytest.raises(InputError, match="'zz'"):
        select(pool, ids=["i1", "zz"])
    with pytest.raises(InputError, match="--skip.*'yy'"):
        select(pool, skip=["yy"])


def test_select_sharding_covers_everything_once() -> None:
    pool = make(23)
    for shuffle in (False, True):
        shards = [ids_of(select(pool, offset=k, stride=4, shuffle=shuffle, seed=7)) for k in range(4)]
        flat = [i for shard in shards for i in shard]
        assert sorted(flat) == sorted(ids_of(pool)) and len(flat) == len(set(flat))
    assert select(pool, offset=30, stride=4) == []


def test_select_shuffle_is_deterministic() -> None:
    pool = make(20)
    first = ids_of(select(pool, shuffle=True, seed=3))
    assert first == ids_of(select(pool, shuffle=True, seed=3))
    assert first != ids_of(pool) and sorted(first) == sorted(ids_of(pool))
    assert first != ids_of(select(pool, shuffle=True, seed=4))
    assert ids_of(pool) == [f"i{k}" for k in range(20)]  # input untouched


def test_select_limit_and_flag_validation() -> None:
    pool = make(10)
    assert ids_of(select(pool, limit=3)) == ["i0", "i1", "i2"]
    assert ids_of(select(pool, offset=1, stride=3, limit=2)) == ["i1", "i4"]
    assert select(pool, limit=0) == []
    for kwargs, flag in [({"stride": 0}, "--stride must be >= 1"), ({"offset": -1}, "--offset must be >= 0"),
                         ({"limit": -1}, "--limit must be >= 0")]:
        with pytest.raises(InputError, match=flag):
            select(pool, **kwargs)


# --- fingerprint --------------------------------------------------------------------------------------

def test_fingerprint_tracks_attachment_bytes(tmp_path: Path) -> None:
    folder = gaia_split(tmp_path / "s")
    (folder / "dir").mkdir()
    (folder / "dir" / "inner.txt").write_text("one")
    write_jsonl(folder / "metadata.jsonl", GAIA_ROWS + [dict(GAIA_ROWS[0], task_id="t4", file_name="dir")])
    base = dataset_fingerprint(load_dataset(folder).instances)
    assert len(base) == 64 and base == dataset_fingerprint(list(reversed(load_dataset(folder).instances)))
    (folder / "data.csv").write_text("x\n1\n17\n")
    changed = dataset_fingerprint(load_dataset(folder).instances)
    assert changed != base
    (folder / "dir" / "inner.txt").write_text("two")
    assert dataset_fingerprint(load_dataset(folder).instances) != changed
    instances = load_dataset(folder).instances
    instances[0] = instances[0].model_copy(update={"answer": "5"})
    assert dataset_fingerprint(instances) != dataset_fingerprint(load_dataset(folder).instances)


def test_fingerprint_unreadable_file_is_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.txt").write_text("a")
    instances = load_dataset(plain(tmp_path, [row("a", files=["a.txt"])])).instances

    def refuse(path: object, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("harness.datasets.fingerprint.open", refuse, raising=False)
    with pytest.raises(InputError, match=r"a\.txt.*Permission denied"):
        dataset_fingerprint(instances)


# --- imports ------------------------------------------------------------------------------------------

def test_model_import_does_not_load_pandas() -> None:
    code = "import sys, harness.datasets.model; print('pandas' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parent.parent)
    assert result.stdout.strip() == "False"


def test_package_exports_still_work() -> None:
    import harness.datasets as package
    from harness.datasets.load import load_dataset as loader
    from harness.datasets.select import select as selector

    assert package.load_dataset is loader and package.select is selector
    assert {"Instance", "load_dataset", "select", "dataset_fingerprint"} <= set(dir(package))
    with pytest.raises(AttributeError):
        package.nope  # noqa: B018


# --- the bundled smoke dataset ------------------------------------------------------------------------

@pytest.mark.skipif(not (SMOKE / "2023" / "validation" / "metadata.jsonl").exists(), reason="smoke dataset absent")
def test_smoke_dataset_loads() -> None:
    instances = load_dataset(SMOKE, split="validation").instances
    assert len(instances) >= 12
    assert {i.level for i in instances} <= {1, 2, 3} and all(i.level is not None for i in instances)
    assert all(i.answer for i in instances)


# --- the sandbox packer's sizes (what validation checks against) ------------------------------------

def test_the_attachment_limit_is_the_services_upload_limit() -> None:
    import harness
    from harness.sandbox import files, service

    source = (Path(harness.__file__).parents[1] / "images" / "sandbox" / "sandboxd.py").read_text()
    assert files.MAX_ARCHIVE_BYTES == service.MAX_BODY == 512 * 1024 * 1024
    assert "\nMAX_BODY = 512 * 1024 * 1024\n" in source


def test_archive_size_is_exactly_what_build_archive_writes(tmp_path: Path) -> None:
    import io
    import tarfile

    from harness.sandbox.files import archive_file, archive_size, build_archive

    (tmp_path / "dir" / "ünïcode dir" / "deep").mkdir(parents=True)
    (tmp_path / "dir" / "ünïcode dir" / "fïle.txt").write_text("x" * 1000)
    (tmp_path / "dir" / "empty").write_bytes(b"")
    (tmp_path / ("long-" * 40 + ".bin")).write_bytes(b"l" * 513)  # a name longer than a ustar header holds
    (tmp_path / "blocks.bin").write_bytes(b"b" * 20480)
    (tmp_path / "link.txt").symlink_to(tmp_path / "blocks.bin")
    for names in (["blocks.bin"], ["dir"], ["dir", "long-" * 40 + ".bin", "link.txt", "blocks.bin"]):
        out = io.BytesIO()
        written = build_archive(tmp_path, names, out)
        assert written == len(out.getvalue()) == archive_size(tmp_path, names), names
        with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as tar:
            assert all(m.isdir() or m.isfile() for m in tar.getmembers())
    with archive_file(tmp_path, ["dir", "link.txt"]) as (fh, size):
        assert fh.tell() == 0 and size == archive_size(tmp_path, ["dir", "link.txt"])
        with tarfile.open(fileobj=fh) as tar:
            assert tar.extractfile("link.txt").read() == b"b" * 20480


def test_a_header_only_csv_has_no_rows_not_missing_columns(tmp_path: Path) -> None:
    """Issue 18 item 11: a CSV with its header alone was reported as missing the columns it has."""
    data = tmp_path / "tasks.csv"
    data.write_text("instance_id,question,answer,files\n")
    with pytest.raises(InputError) as err:
        load_dataset(data)
    text = str(err.value)
    assert "no rows (only a header: instance_id, question, answer, files)" in text and str(data) in text
    assert "missing" not in text
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    with pytest.raises(InputError, match="no rows"):
        load_dataset(empty)
    torn = tmp_path / "torn.jsonl"
    torn.write_text("{not json\n")
    with pytest.raises(InputError) as err:
        load_dataset(torn)
    assert "invalid JSON" in str(err.value) and "missing" not in str(err.value)


def test_an_output_dir_inside_what_is_packed_is_refused(tmp_path: Path) -> None:
    """Issue 18 item 5: a run directory inside an attached folder (or the whole dataset folder, or
    --website's folder) would be packed into later containers; refused naming both paths."""
    from harness.datasets.packed import check_output_outside

    root = tmp_path / "data"
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "other").mkdir()
    (root / "a.txt").write_text("a")
    (root / "linked").symlink_to(root / "docs")
    folder = Instance(instance_id="f", question="q", files=["a.txt", "docs"], root=root)
    with pytest.raises(InputError) as err:
        check_output_outside([folder], root / "docs" / "deep" / "run")
    assert str(root / "docs" / "deep" / "run") in str(err.value) and str(root / "docs") in str(err.value)
    assert "\n" not in str(err.value) and "instance f" in str(err.value)
    with pytest.raises(InputError, match="'linked'"):  # through a symlinked attachment too
        check_output_outside([folder.model_copy(update={"files": ["linked"]})], root / "docs" / "run")
    with pytest.raises(InputError, match="'.'"):  # the dataset's whole folder
        check_output_outside([folder.model_copy(update={"files": ["."]})], root / "other" / "run")
    with pytest.raises(InputError, match="--website"):
        check_output_outside([], root / "site" / "run", website=root / "site")
    check_output_outside([folder], root / "other" / "run")  # beside the attachments: packed by nobody
    check_output_outside([folder], root / "docs-run")
    check_output_outside([folder], tmp_path / "elsewhere", website=root / "site")
