"""Benchmark the harness sandbox against the raw Docker SDK, in one process.

  .venv/bin/python bench/sandbox.py [--rounds N] [--commands M]

1. Lifecycle of one instance (median of N rounds, order alternated each round):
   harness: provider.open -> copy_in one small file -> 3 shell commands -> teardown
   raw SDK: create + start a sleep container (docker --init) with the same limits and network
            -> put_archive the same file -> 3 exec_run -> remove(force, v)
2. Command latency (median of M, interleaved): sb.shell("echo hi") vs
   container.exec_run(["bash", "-c", "echo hi"]) on the same running sandbox.
See bench/README.md for how to read the ratios.
"""

from __future__ import annotations

import argparse
import io
import secrets
import signal
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import docker
import docker.errors

from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker import naming, networks
from harness.sandbox.registry import get_provider

PROVIDER = get_provider("docker")

LIFECYCLE_TARGET = 1.15  # harness / raw
COMMAND_TARGET = 0.2  # harness / exec_run
WARMUP_ROUNDS, WARMUP_COMMANDS = 2, 10
FILE_NAME, FILE_TEXT = "data.txt", "hello from the bench\n"
COMMANDS = ["echo hi", "ls /workspace", f"cat /workspace/{FILE_NAME}"]
EXPECTED = ["hi\n", f"{FILE_NAME}\n", FILE_TEXT]


def check(got: str, want: str, what: str) -> None:
    if got != want:
        raise RuntimeError(f"{what}: expected {want!r}, got {got!r}")


def harness_round(image: str, run_id: str, index: int, root: Path) -> float:
    spec = SandboxSpec(image=image, run_id=run_id, instance_id=f"i-{index}")
    started = time.perf_counter()
    with PROVIDER.open(spec) as sb:
        sb.copy_in(root, [FILE_NAME])
        outputs = [sb.shell(cmd).stdout for cmd in COMMANDS]
    elapsed = time.perf_counter() - started
    for cmd, got, want in zip(COMMANDS, outputs, EXPECTED, strict=True):
        check(got, want, f"harness {cmd!r}")
    return elapsed


def raw_round(client: docker.DockerClient, image: str, run_id: str, root: Path) -> float:
    labels = {naming.LABEL_MANAGED: "1", naming.LABEL_RUN: run_id, naming.LABEL_OWNER: naming.owner_token()}
    started = time.perf_counter()
    container = client.containers.create(
        image, entrypoint=["sleep", "infinity"], init=True, detach=True, labels=labels,
        ports={"8765/tcp": ("127.0.0.1", None)}, mem_limit="2g", memswap_limit="2g",
        nano_cpus=int(1e9), pids_limit=512, security_opt=["no-new-privileges"],
        cap_drop=["ALL"], network=networks.ISOLATED,
    )
    try:
        container.start()
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(root / FILE_NAME, arcname=FILE_NAME)
        if not container.put_archive("/workspace", buffer.getvalue()):
            raise RuntimeError("put_archive failed")
        outputs = [container.exec_run(["bash", "-c", cmd]).output.decode() for cmd in COMMANDS]
    finally:
        container.remove(force=True, v=True)
    elapsed = time.perf_counter() - started
    for cmd, got, want in zip(COMMANDS, outputs, EXPECTED, strict=True):
        check(got, want, f"raw {cmd!r}")
    return elapsed


def interleave(ours, raw, count: int, warmup: int) -> tuple[list[float], list[float]]:
    """Time ours() and raw() count times each after warmup, alternating who goes first."""
    a, b = [], []
    for i in range(warmup + count):
        if i % 2:  # alternate the order to cancel drift
            t_raw, t_ours = raw(i), ours(i)
        else:
            t_ours, t_raw = ours(i), raw(i)
        if i >= warmup:
            a.append(t_ours)
            b.append(t_raw)
    return a, b


def command_latency(client, image: str, run_id: str, count: int):
    with PROVIDER.open(SandboxSpec(image=image, run_id=run_id, instance_id="latency")) as sb:
        container = client.containers.get(sb.id)

        def via_harness(_: int) -> float:
            started = time.perf_counter()
            out = sb.shell("echo hi").stdout
            elapsed = time.perf_counter() - started
            check(out, "hi\n", "harness echo")
            return elapsed

        def via_exec(_: int) -> float:
            started = time.perf_counter()
            out = container.exec_run(["bash", "-c", "echo hi"]).output.decode()
            elapsed = time.perf_counter() - started
            check(out, "hi\n", "exec_run echo")
            return elapsed

        return interleave(via_harness, via_exec, count, WARMUP_COMMANDS)


def p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10, method="inclusive")[-1] if len(xs) > 1 else xs[0]


def report(title: str, rows: list[tuple[str, list[float]]], target: float) -> tuple[str, float]:
    print(title)
    for label, xs in rows:
        print(f"  {label:<10} median {statistics.median(xs) * 1000:8.1f}   p90 {p90(xs) * 1000:8.1f}")
    ratio = statistics.median(rows[0][1]) / statistics.median(rows[1][1])
    print(f"  ratio {rows[0][0]}/{rows[1][0]} = {ratio:.3f}   (target <= {target})")
    return ("PASS" if ratio <= target else "MISS"), ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="lifecycle rounds (after warm-up)")
    parser.add_argument("--commands", type=int, default=200, help="echo commands per side (after warm-up)")
    args = parser.parse_args()
    if args.rounds < 1 or args.commands < 1:
        parser.error("--rounds and --commands must be >= 1")
    # SIGTERM unwinds like Ctrl-C, so the finally blocks below still remove containers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    image = PROVIDER.preflight()
    networks.ensure_isolated()  # created once up front, so neither side pays for it
    client = docker.from_env()
    run_id = f"bench-{secrets.token_hex(3)}"
    print(f"image {image}  run {run_id}  rounds {args.rounds} (+{WARMUP_ROUNDS} warm-up)  "
          f"commands {args.commands} (+{WARMUP_COMMANDS} warm-up)")
    try:
        with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
            root = Path(tmp)
            (root / FILE_NAME).write_text(FILE_TEXT)
            ours, raw = interleave(lambda i: harness_round(image, run_id, i, root),
                                   lambda i: raw_round(client, image, run_id, root), args.rounds, WARMUP_ROUNDS)
        life = report("lifecycle per instance (ms): open, copy_in, 3 commands, teardown",
                      [("harness", ours), ("raw", raw)], LIFECYCLE_TARGET)
        ours, raw = command_latency(client, image, run_id, args.commands)
        cmd = report("command latency (ms): echo hi on one running sandbox",
                     [("harness", ours), ("exec", raw)], COMMAND_TARGET)
        print(f"{life[0]} lifecycle harness/raw {life[1]:.3f} <= {LIFECYCLE_TARGET}")
        print(f"{cmd[0]} command harness/exec {cmd[1]:.3f} <= {COMMAND_TARGET}")
    finally:
        left = len(PROVIDER.cleanup(run_id=run_id))
        if left:
            print(f"removed {left} leftover container(s) of {run_id}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("interrupted")
