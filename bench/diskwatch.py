"""Measure how far agent code gets past --disk in a sandbox with a writable root on an engine without a storage quota
(a Harbor task's: harness/sandbox/docker/diskwatch.py), the watcher as it is against the poll it replaced, in one run.

  .venv/bin/python bench/diskwatch.py [--rounds N] [--disk SIZE]   # defaults: 3, 256m

Each round starts one sandbox of a small task image (root, writable root) per side and writer, the sides
alternating, and runs a writer that would fill the engine's disk if nothing stopped it:
  one-file: one `dd` of 2 GiB at full speed;
  files:    8 MiB files one after another, up to 1.6 GiB;
  parallel: four `dd`s of 1 GiB at once.
  now:      the watcher as it is (RLIMIT_FSIZE at the layer's bound, the engine's disk looked at every TICK_S);
  poll:     what it replaced: no file size limit, the layer's size asked every POLL_S only.
What is printed per writer: the layer's size once the sandbox was ended (median, max of N), as a multiple of its
bound, and the ratio poll/now. Needs a local engine on a filesystem without a quota (overlay2 on ext4).
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.errors import SandboxDiskLimit  # noqa: E402
from harness.sandbox.contract import SandboxSpec, parse_size  # noqa: E402
from harness.sandbox.docker import diskwatch, storage  # noqa: E402
from harness.sandbox.registry import get_provider  # noqa: E402

WRITERS = {
    "one-file": "dd if=/dev/zero of=/opt/big bs=1M count=2048 2>/dev/null; sleep 60",
    "files": "for i in $(seq 200); do head -c 8M /dev/zero > /opt/f$i || break; done; sleep 60",
    "parallel": "for j in 1 2 3 4; do dd if=/dev/zero of=/opt/p$j bs=1M count=1024 2>/dev/null & done; sleep 60",
}


def as_before() -> ExitStack:
    """What the watcher replaced, while the stack is open: no RLIMIT_FSIZE, no look at the engine's disk."""
    options, stack = storage.create_options, ExitStack()
    stack.enter_context(mock.patch.object(
        storage, "create_options", lambda spec: {k: v for k, v in options(spec).items() if k != "ulimits"}))
    stack.enter_context(mock.patch.object(diskwatch, "engine_disk_used", lambda: None))
    return stack


def one(provider, tag: str, disk: str, writer: str) -> int:
    """The layer's size in bytes once the writer's sandbox was ended."""
    sandbox = provider.start(SandboxSpec(image=tag, run_id="bench-disk-" + secrets.token_hex(3), instance_id=writer,
                                         disk=disk, writable_root=True))
    try:
        try:
            sandbox.shell(WRITERS[writer], timeout=120)
        except SandboxDiskLimit:
            pass
        else:
            raise SystemExit(f"{writer}: the sandbox was not ended past its disk limit")
        return diskwatch.layer_size(sandbox.id)
    finally:
        provider.teardown(sandbox)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--disk", default="256m")
    args = parser.parse_args()
    provider = get_provider("docker")
    image = provider.preflight(log=lambda m: None)
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp) / "environment"
        context.mkdir()
        (context / "Dockerfile").write_text(f"FROM {image}\nUSER root\nWORKDIR /app\n")
        tag = provider.image_of(str(context), log=lambda m: None)
        if not storage.writable_root(SandboxSpec(image=tag, run_id="r", instance_id="i", disk=args.disk,
                                                 writable_root=True)):
            raise SystemExit("this engine has a storage quota: nothing is watched here")
        bound = storage.writable_root_places(tag, parse_size(args.disk))[1]
        got: dict[tuple[str, str], list[int]] = {}
        for round_ in range(args.rounds):
            for writer in WRITERS:
                sides = ("now", "poll") if round_ % 2 == 0 else ("poll", "now")
                for side in sides:
                    with as_before() if side == "poll" else ExitStack():
                        got.setdefault((writer, side), []).append(one(provider, tag, args.disk, writer))
    mib = 1 << 20

    def cell(sizes: list[int]) -> str:
        return f"{statistics.median(sizes) / mib:.0f} / {max(sizes) / mib:.0f} MiB " \
               f"({statistics.median(sizes) / bound:.2f}x)"

    print(f"--disk {args.disk}: the writable layer's bound is {bound / mib:.0f} MiB; {args.rounds} rounds")
    print(f"{'writer':<10} {'now: median / max':>26} {'poll: median / max':>26} {'poll/now':>9}")
    for writer in WRITERS:
        now, poll = got[(writer, "now")], got[(writer, "poll")]
        ratio = statistics.median(poll) / statistics.median(now)
        print(f"{writer:<10} {cell(now):>26} {cell(poll):>26} {ratio:>8.2f}x")

if __name__ == "__main__":
    main()
