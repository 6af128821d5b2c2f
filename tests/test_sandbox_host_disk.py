"""What hostile agent code in a sandbox can do to the host's disk (issue 38): the socket transport's directory
(harness/sandbox/docker/sockets.py) is mounted read-only, so nothing written there reaches the host, whatever the
sandbox's user (a task image's root included: no bytes past --disk, no FIFO, link or setuid file); the host
connects only to a socket of its own user, following no link (harness/sandbox/unix_http.py); and a task image's
VOLUME is a size-limited tmpfs share of --disk, not an anonymous volume on the engine's disk
(harness/sandbox/docker/storage.py)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from harness.errors import SandboxDiskLimit, SocketRefused
from harness.fsutil import tree_hash
from harness.sandbox.contract import SandboxSpec, parse_size
from harness.sandbox.docker import diskwatch, engine, sockets, storage
from harness.sandbox.docker.task_images import task_tag
from harness.sandbox.unix_http import connect
from tests.helpers.wait import wait_for

# Every way agent code might leave something in the mounted directory: more bytes than --disk, a FIFO, a link
# under the name a socket would have, a file, a directory, a setuid copy of bash; each line says what happened.
HOSTILE = r"""
cd /run/harness || exit 9
try() { if "$@" 2>/dev/null; then echo "done: $*"; else echo "refused: $*"; fi; }
try sh -c 'head -c 100M /dev/zero > big'
try mkfifo sandboxd.sock
try ln -s /etc/passwd link.sock
try touch file
try mkdir dir
try sh -c 'cp /bin/bash rootbash && chmod 4755 rootbash'
try mount -o remount,rw /run/harness
"""


def spec(image: str, run_id: str, instance: str = "i", **kw) -> SandboxSpec:
    return SandboxSpec(image=image, run_id=run_id, instance_id=instance, **kw)


def host_entries(directory: Path) -> list[str]:
    return sorted(os.listdir(directory)) if directory.exists() else []


def attempts(output: str) -> dict[str, str]:
    return {line.split(": ", 1)[1]: line.split(":", 1)[0] for line in output.splitlines() if ": " in line}


@pytest.fixture(scope="module")
def root_task(image, tmp_path_factory):
    """A task image of our own (the sandbox image as its base: python3 and bash, no package installed) that runs
    as root and declares VOLUME /data holding a file: its sandbox's tag and the task's context."""
    context = tmp_path_factory.mktemp("root-task") / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {image}\nUSER root\nWORKDIR /app\nRUN mkdir -p /data && echo seeded > /data/seed.txt && "
        f"echo {secrets.token_hex(4)} > /app/mark\nVOLUME /data\n")
    from harness.sandbox.registry import get_provider

    tag = get_provider("docker").image_of(str(context), log=lambda m: None)
    try:
        yield tag
    finally:
        subprocess.run(["docker", "rmi", task_tag(context), f"harness-taskenv:{tree_hash(context)}"],
                       capture_output=True, timeout=120)


@pytest.mark.docker
def test_agent_code_writes_nothing_into_the_socket_directory_on_the_host(provider, image, run_id):
    """It wrote 600 MB there under --disk 256m (a host directory, mode 0777), and FIFOs and links."""
    with provider.open(spec(image, run_id, disk="64m")) as sb:
        directory, private = sockets.paths(sb.name)
        assert sb.handle().socket == str(private)
        result = sb.shell(HOSTILE, timeout=120)
        tried = attempts(result.stdout)
        assert len(tried) == 7 and set(tried.values()) == {"refused"}, result
        assert "Read-only file system" in sb.shell("touch /run/harness/x 2>&1").stdout
        assert host_entries(directory) == []  # nothing of the sandbox's on the host
        assert sb.shell("echo still served").stdout == "still served\n"
    assert not directory.exists() and not private.exists()


@pytest.mark.docker
def test_a_root_task_image_leaves_no_setuid_file_on_the_host(provider, root_task, run_id):
    with provider.open(spec(root_task, run_id, disk="64m")) as sb:
        assert sb.shell("id -u").stdout == "0\n"
        directory, _ = sockets.paths(sb.name)
        result = sb.shell(HOSTILE, timeout=120)
        tried = attempts(result.stdout)
        assert len(tried) == 7 and set(tried.values()) == {"refused"}, result
        assert host_entries(directory) == []


@pytest.mark.docker
def test_a_task_images_volume_is_a_share_of_disk_not_the_engines_disk(provider, root_task, run_id):
    """`VOLUME /data` made an anonymous volume on the engine's disk, outside --disk: now a tmpfs share of it,
    seeded with what the image holds there, and the engine makes no volume."""
    with provider.open(spec(root_task, run_id, disk="64m")) as sb:
        filled = sb.shell("head -c 100M /dev/zero > /data/big; echo $?", timeout=120)
        assert filled.stdout.strip() != "0" and "No space left" in filled.stderr, filled
        mounts = engine.client().api.inspect_container(sb.id)["Mounts"]
        assert [m for m in mounts if m.get("Type") == "volume"] == [], mounts
        assert sb.shell("cat /data/seed.txt").stdout == "seeded\n"  # the image's own file, copied in
        assert sb.shell("cat /app/mark").stdout.strip()  # the working directory still seeded too
        df = sb.shell("df -k --output=fstype,size /data | tail -1").stdout.split()
    disk = parse_size("64m")
    shares = storage.tmpfs_places(root_task, disk)
    assert sum(size for size, _ in shares.values()) == disk
    assert df == ["tmpfs", str(-(-shares["/data"][0] // 4096) * 4)], df  # in whole pages


@pytest.mark.docker
def test_one_file_written_at_full_speed_stops_at_the_writable_layers_bound(provider, root_task, run_id):
    """A writable root (a Harbor task's) on this engine, which has no storage quota: a file written as fast as the
    disk takes it stops at the layer's bound (RLIMIT_FSIZE), not wherever the watcher's next look finds it (6.45x
    the bound before: bench/diskwatch.py), and the sandbox is ended as past its disk limit."""
    wanted = spec(root_task, run_id, disk="256m", writable_root=True)
    assert storage.writable_root(wanted), "this test needs an engine without a storage quota (overlay2 on ext4)"
    bound = storage.writable_root_places(root_task, parse_size("256m"))[1]
    with provider.open(wanted) as sb:
        with pytest.raises(SandboxDiskLimit):
            sb.shell("dd if=/dev/zero of=/opt/big bs=1M count=2048; sleep 60", timeout=120)
        wait_for(lambda: engine.container_state(sb.id).get("Running") is False, 60, "the sandbox to be ended")
        assert diskwatch.layer_size(sb.id) <= bound + (1 << 20), (diskwatch.layer_size(sb.id), bound)


def test_the_watcher_asks_sooner_as_the_engines_disk_fills():
    """Without an engine: the layer's size is asked every POLL_S, and sooner once the engine's disk has grown by half
    the room the layer had left at the last ask, but never sooner than twice that ask's own time after it."""
    used = [0]
    mib = 1 << 20
    schedule = diskwatch.Schedule(100 * mib, 0.5, lambda: used[0], now=0.0)
    assert not schedule.due(0.1) and schedule.due(0.5)
    schedule.asked(20 * mib, started=0.49, now=0.5)  # 80 MiB left: due again at 40 MiB more on the disk
    used[0] = 39 * mib
    assert not schedule.due(0.6)
    used[0] = 40 * mib
    assert schedule.due(0.6)
    assert not schedule.due(0.51)  # the last ask took 10 ms: not before 20 ms after it
    schedule.asked(60 * mib, started=0.6, now=0.61)  # 40 MiB left: due at 20 MiB more
    used[0] = 60 * mib
    assert schedule.due(0.64)
    blind = diskwatch.Schedule(100 * mib, 0.5, None, now=0.0)  # a remote engine: the poll alone
    assert not blind.due(0.49) and blind.due(0.5)


@pytest.mark.docker
def test_the_host_refuses_whatever_takes_the_sockets_place(provider, image, run_id, tmp_path):
    """The host followed what was put under the socket's name (1,747 connections through a planted link): now a
    FIFO, a link, a file or another user's socket there is SocketRefused, and nothing is followed."""
    with provider.open(spec(image, run_id)) as sb:
        handle = sb.handle()
        private = Path(handle.socket)
        decoy, accepted = _counting_listener(tmp_path / "decoy.sock")
        real = private.with_name(private.name + ".real")
        os.rename(private, real)
        try:
            plants = {"fifo": lambda: os.mkfifo(private), "link": lambda: os.symlink(decoy, private),
                      "file": lambda: private.write_text("not a socket")}
            if os.geteuid() == 0:
                plants["other user's socket"] = lambda: _other_users_socket(private)
            for kind, plant in plants.items():
                plant()
                other = provider.attach(handle)
                try:
                    with pytest.raises(SocketRefused):
                        other.shell("echo reached")
                finally:
                    other.close()
                    private.unlink()
                assert accepted == [], kind
        finally:
            os.rename(real, private)
        assert sb.shell("echo served").stdout == "served\n"


def _counting_listener(path: Path) -> tuple[Path, list[int]]:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    accepted: list[int] = []

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            accepted.append(1)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return path, accepted


def _other_users_socket(path: Path) -> socket.socket:
    held = socket.socket(socket.AF_UNIX)
    held.bind(str(path))
    held.listen()
    os.chown(path, 4242, 4242)
    return held


def test_connect_reaches_only_a_socket_of_this_user(tmp_path):
    """Without an engine: the one way the host dials a sandbox's socket (its pool and its TCP forward)."""
    good, accepted = _counting_listener(tmp_path / "good.sock")
    connect(str(good), timeout=5).close()
    assert connect(str(good)).fileno() >= 0
    (tmp_path / "fifo").parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "fifo")
    os.symlink(good, tmp_path / "link")
    (tmp_path / "file").write_text("x")
    before = wait_for(lambda: len(accepted) == 2 and 2, 10, "the listener to accept the two good connects")
    for name in ("fifo", "link", "file"):
        with pytest.raises(SocketRefused, match=f"{name}"):
            connect(str(tmp_path / name), timeout=5)
    if os.geteuid() == 0:
        _other_users_socket(tmp_path / "theirs.sock")
        with pytest.raises(SocketRefused, match="owned by uid 4242"):
            connect(str(tmp_path / "theirs.sock"), timeout=5)
    with pytest.raises(FileNotFoundError):
        connect(str(tmp_path / "missing.sock"))
    connect(str(good), timeout=5).close()  # accepted in order: had the link been followed, it would come first
    wait_for(lambda: len(accepted) > before, 10, "the listener to accept the marker connect")
    assert len(accepted) == before + 1  # the link was never followed


def test_every_declared_volume_gets_a_tmpfs_share_of_disk(monkeypatch):
    """Without an engine: the places of a harness image and of a task's own image, each with VOLUMEs, add up to
    --disk; on a quota engine the volumes take half of it as tmpfs and the quota the rest."""
    disk = parse_size("1g")
    monkeypatch.setattr(storage, "_images", {
        "plain": (None, ()), "vol": (None, ("/data", "/workspace")),
        "task": (("/app", "/logs", "/tests", "/solution"), ("/data", "/logs", "/srv/cache"))})
    assert storage.tmpfs_places("plain", disk) == {
        place: (size, mode) for place, size, mode in (
            ("/workspace", disk // 2, "uid=1000,gid=1000,mode=0755"), ("/tmp", disk // 4, "mode=1777"),
            ("/home/agent", disk // 4, "uid=1000,gid=1000,mode=0755"))}
    for image, want in (("vol", {"/workspace", "/tmp", "/home/agent", "/data"}),
                        ("task", {"/app", "/tmp", "/workspace", "/logs", "/tests", "/solution", "/data",
                                  "/srv/cache"})):
        places = storage.tmpfs_places(image, disk)
        assert set(places) == want and sum(size for size, _ in places.values()) == disk, places
    monkeypatch.setattr(storage, "backend", lambda image, size: storage.Backend("quota", "test"))
    options = storage.create_options(SandboxSpec(image="task", run_id="r", instance_id="i", disk="1g",
                                                 memory="2g"))
    held = sum(parse_size(o.split("size=")[1].split(",")[0]) for o in options["tmpfs"].values())
    assert set(options["tmpfs"]) == {"/data", "/logs", "/srv/cache"} and held == disk // 2 // 3 * 3
    assert int(options["storage_opt"]["size"]) + held == disk
    assert options["mem_limit"] == parse_size("2g") + held
    assert "tmpfs" not in storage.create_options(SandboxSpec(image="plain", run_id="r", instance_id="i", disk="1g"))


def test_a_writable_root_keeps_tmpfs_only_where_it_must_and_watches_the_rest(monkeypatch):
    """Without an engine, on the tmpfs backend: a task's own image with `writable_root` has a writable root and tmpfs
    for /workspace, Harbor's places and its VOLUMEs (a quarter of --disk), its working directory and /tmp in the layer,
    whose bound (diskwatch.py) is the rest; a harness image, or a spec without it, keeps the read-only root."""
    disk = parse_size("1g")
    monkeypatch.setattr(storage, "_images", {
        "plain": (None, ()), "task": (("/app", "/logs", "/tests", "/solution"), ("/data", "/logs"))})
    monkeypatch.setattr(storage, "backend", lambda image, size: storage.Backend("tmpfs", "test"))
    sizes, bound = storage.writable_root_places("task", disk)
    assert list(sizes) == ["/workspace", "/logs", "/tests", "/solution", "/data"]
    assert bound + sum(sizes.values()) == disk
    assert sum(sizes.values()) <= disk // 4 and bound >= disk * 3 // 4
    spec = SandboxSpec(image="task", run_id="r", instance_id="i", disk="1g", memory="2g", writable_root=True)
    options = storage.create_options(spec)
    assert "read_only" not in options and set(options["tmpfs"]) == set(sizes), options
    assert options["mem_limit"] == parse_size("2g") + sum(sizes.values())
    assert options["ulimits"] == [{"name": "fsize", "soft": bound, "hard": bound}]
    for kept in (spec.model_copy(update={"writable_root": False}), spec.model_copy(update={"image": "plain"})):
        assert not storage.writable_root(kept) and storage.create_options(kept)["read_only"] is True
