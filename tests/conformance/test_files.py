"""Conformance: moving files in (`copy_in`) and out (`read_file`), and the typed refusals of both."""

from __future__ import annotations

import hashlib
import http.client
import json
import secrets

import pytest

import harness.sandbox.service
from harness.errors import (
    InputError,
    SandboxFileNotFound,
    SandboxIsADirectory,
    SandboxOutputLimit,
    SandboxPermissionDenied,
    SandboxRequestError,
)
from harness.sandbox.contract import DEFAULT_MAX_READ


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def task_files(tmp_path):
    """A task folder: a binary file, a folder with a unicode name inside, a symlink that stays
    inside (copied as its target's content), and links/names that escape it."""
    root = tmp_path / "task"
    (root / "sub dir" / "deeper").mkdir(parents=True)
    files = {
        "data.bin": secrets.token_bytes(300_000),
        "sub dir/ünï code.txt": "nested ✓\n".encode(),
        "sub dir/deeper/empty": b"",
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    (root / "inside-link").symlink_to(root / "data.bin")
    (tmp_path / "secret").write_text("host secret")
    (root / "escape-link").symlink_to(tmp_path / "secret")
    return root, files


def test_copy_in_round_trip_files_and_folders(sandbox, task_files):
    root, files = task_files
    dest = f"/workspace/round-{secrets.token_hex(3)}"
    written = sandbox.copy_in(root, ["data.bin", "sub dir", "inside-link"], dest=dest)
    assert {"data.bin", "sub dir/ünï code.txt", "sub dir/deeper/empty", "inside-link"} <= set(written)
    for name, data in files.items():
        got = sandbox.read_file(f"{dest}/{name}")
        assert sha(got) == sha(data), name
    assert sandbox.read_file(f"{dest}/inside-link") == files["data.bin"]
    assert sandbox.shell(f"test -L '{dest}/inside-link'").exit_code == 1  # content, not a link
    # The sandbox sees the same bytes as the host did, and the agent owns what arrived.
    inside = sandbox.shell(f"cd '{dest}' && sha256sum data.bin 'sub dir/ünï code.txt' && "
                           "touch 'sub dir/new' && echo writable")
    assert inside.stdout.split()[0] == sha(files["data.bin"])
    assert inside.stdout.split()[2] == sha(files["sub dir/ünï code.txt"])
    assert inside.stdout.rstrip().endswith("writable")


def test_copy_in_defaults_to_the_workspace(sandbox, task_files):
    root, files = task_files
    sandbox.copy_in(root, ["data.bin"])
    assert sha(sandbox.read_file("/workspace/data.bin")) == sha(files["data.bin"])
    assert sandbox.shell("cat data.bin | sha256sum").stdout.split()[0] == sha(files["data.bin"])


@pytest.mark.parametrize("name", ["../secret", "/etc/passwd", "escape-link", "sub dir/../../secret", "missing",
                                  ""])
def test_copy_in_refuses_bad_names_before_sending(sandbox, task_files, name):
    root, _ = task_files
    dest = f"/workspace/refused-{secrets.token_hex(3)}"
    with pytest.raises(InputError):
        sandbox.copy_in(root, ["data.bin", name], dest=dest)
    # Nothing arrived, not even the good name listed first.
    assert sandbox.shell(f"test -e {dest} || test -e /workspace/secret || test -e /secret").exit_code == 1


def test_read_file_of_a_missing_file(sandbox):
    with pytest.raises(SandboxFileNotFound) as err:
        sandbox.read_file("/workspace/no-such-file")
    assert isinstance(err.value, FileNotFoundError)


def test_read_file_without_permission(sandbox):
    with pytest.raises(SandboxPermissionDenied) as err:
        sandbox.read_file("/etc/shadow")
    assert isinstance(err.value, PermissionError)
    sandbox.shell("echo private > /tmp/mode000 && chmod 000 /tmp/mode000")
    with pytest.raises(SandboxPermissionDenied):
        sandbox.read_file("/tmp/mode000")


def test_read_file_of_a_directory(sandbox):
    with pytest.raises(SandboxIsADirectory) as err:
        sandbox.read_file("/workspace")
    assert isinstance(err.value, IsADirectoryError)


def test_read_file_limit(sandbox):
    sandbox.shell("head -c 1000 /dev/zero > /tmp/k1")
    assert sandbox.read_file("/tmp/k1", max_bytes=1000) == b"\0" * 1000
    with pytest.raises(SandboxOutputLimit):
        sandbox.read_file("/tmp/k1", max_bytes=999)


def test_read_file_of_a_non_regular_file_is_refused_not_hung(fresh):
    fresh.shell("mkfifo /tmp/fifo")  # opening it to read waits for a writer that never comes
    for path in ["/tmp/fifo", "/dev/zero"]:
        with pytest.raises(SandboxRequestError):
            fresh.read_file(path)
    assert fresh.shell("echo alive").stdout == "alive\n"


def test_read_file_streams_a_large_file_exactly(sandbox):
    size = 24 * 1024 * 1024 + 5
    made = sandbox.shell(f"head -c {size} /dev/urandom > /tmp/large && sha256sum /tmp/large")
    data = sandbox.read_file("/tmp/large")
    assert len(data) == size and sha(data) == made.stdout.split()[0]
    sandbox.shell("rm -f /tmp/large")


def test_a_huge_file_read_with_the_default_limit_is_refused_and_the_sandbox_lives(fresh):
    made = fresh.shell("truncate -s 1100M /workspace/huge && stat -c %s /workspace/huge")
    assert made.stdout.strip() == str(1100 * 1024 * 1024)
    assert 1100 * 1024 * 1024 > DEFAULT_MAX_READ
    with pytest.raises(SandboxOutputLimit):
        fresh.read_file("/workspace/huge")
    assert fresh.shell("echo alive").stdout == "alive\n"
    fresh.shell("echo small > /workspace/small")
    assert fresh.read_file("/workspace/small") == b"small\n"


def test_an_upload_over_the_service_limit_is_refused_before_sending(sandbox, tmp_path, monkeypatch):
    monkeypatch.setattr(harness.sandbox.service, "MAX_BODY", 4096)
    (tmp_path / "big").write_bytes(b"x" * 10_000)
    (tmp_path / "small").write_bytes(b"y")
    dest = f"/workspace/limit-{secrets.token_hex(3)}"
    with pytest.raises(SandboxOutputLimit):
        sandbox.copy_in(tmp_path, ["small", "big"], dest=dest)
    with pytest.raises(SandboxFileNotFound):
        sandbox.read_file(f"{dest}/small")  # nothing was sent
    monkeypatch.undo()
    sandbox.copy_in(tmp_path, ["small", "big"], dest=dest)
    assert sandbox.read_file(f"{dest}/big") == b"x" * 10_000


def test_the_service_answers_an_oversize_upload_with_413_too_large(sandbox):
    conn_info = sandbox.connection()
    conn = http.client.HTTPConnection(conn_info.host, conn_info.port, timeout=20)
    try:
        conn.putrequest("POST", "/upload?dest=/workspace")
        for key, value in conn_info.headers.items():
            conn.putheader(key, value)
        conn.putheader("Content-Length", str(harness.sandbox.service.MAX_BODY + 1))
        conn.endheaders()  # and no body: the service must answer from the headers alone
        resp = conn.getresponse()
        body = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 413
    assert body["code"] == "too_large" and body["error"]
    assert sandbox.shell("echo alive").stdout == "alive\n"


def test_copy_in_refused_inside_the_sandbox_is_a_typed_request_error(sandbox, tmp_path):
    (tmp_path / "f").write_text("payload")
    sandbox.shell("mkdir -p /workspace/refuse && echo file > /workspace/refuse/plain "
                  "&& mkdir -p /workspace/refuse/ro && chmod 555 /workspace/refuse/ro")
    with pytest.raises(SandboxRequestError) as into_file:
        sandbox.copy_in(tmp_path, ["f"], dest="/workspace/refuse/plain")
    assert not isinstance(into_file.value, InputError)
    assert sandbox.read_file("/workspace/refuse/plain") == b"file\n"
    with pytest.raises(SandboxPermissionDenied):
        sandbox.copy_in(tmp_path, ["f"], dest="/workspace/refuse/ro")
    with pytest.raises(SandboxFileNotFound):
        sandbox.read_file("/workspace/refuse/ro/f")
    with pytest.raises(SandboxRequestError):
        sandbox.copy_in(tmp_path, ["f"], dest="/etc")  # outside what the sandbox lets a caller write
    assert sandbox.shell("test -e /etc/f").exit_code == 1


def test_copy_in_over_a_read_only_file_is_refused_as_for_agent_code(sandbox, tmp_path):
    """Issue 18 item 10: a file the agent made read-only (`chmod -w`) is not replaced by copy_in, and a
    folder it made read-only takes no new file, even in a subfolder copy_in would create: the refusal
    is SandboxPermissionDenied naming the path, and nothing of the archive is written."""
    dest = f"/workspace/ro-{secrets.token_hex(3)}"
    (tmp_path / "f").write_text("first")
    sandbox.copy_in(tmp_path, ["f"], dest=dest)
    sandbox.shell(f"chmod a-w {dest}/f")
    assert sandbox.shell(f"echo agent > {dest}/f").exit_code != 0  # what the agent's own write meets
    (tmp_path / "f").write_text("second")
    (tmp_path / "g").write_text("new")
    with pytest.raises(SandboxPermissionDenied) as err:
        sandbox.copy_in(tmp_path, ["g", "f"], dest=dest)
    assert f"{dest}/f" in str(err.value)
    assert sandbox.read_file(f"{dest}/f") == b"first"
    with pytest.raises(SandboxFileNotFound):
        sandbox.read_file(f"{dest}/g")  # checked before anything moved
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "h").write_text("deep")
    sandbox.shell(f"mkdir {dest}/sub && chmod a-w {dest}/sub")
    with pytest.raises(SandboxPermissionDenied) as err:
        sandbox.copy_in(tmp_path, ["g", "sub"], dest=dest)
    assert f"{dest}/sub/h" in str(err.value)
    assert sandbox.shell(f"test -e {dest}/g || test -e {dest}/sub/h").exit_code == 1
    sandbox.shell(f"chmod u+w {dest}/f")  # writable again: replaced as before
    sandbox.copy_in(tmp_path, ["f"], dest=dest)
    assert sandbox.read_file(f"{dest}/f") == b"second"
