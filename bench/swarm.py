"""Benchmark the swarm provider against the docker provider, on this machine, in one run.

  .venv/bin/python bench/swarm.py [--rounds N] [--instances M] [--workers W] [--no-two-nodes]

1. Sandbox start latency (provider.start until sandboxd answers; median of N rounds, the two
   providers alternated each round) on a single-node swarm of the host engine vs the plain
   docker provider; teardown latency too. The ratio swarm/docker is printed on its own line.
   Also the preflight node check (the global job that runs `true` on every node).
2. No-op agent throughput: M instances, W at a time, each = start, one command, then teardown
   on a background pool as the runner does (the clock stops when all are removed), on a
   1-node swarm and then on a 2-node swarm (the host engine as manager plus a second dockerd
   in its own network namespace, tests/helpers/engines.py; needs root; the sandbox image is
   loaded into it the first time, ~30 s). cpus=0.5 per sandbox so reservations never throttle
   the single node below W. Both engines share this machine's CPUs: the 2-node figure measures
   the swarm's overhead and spread, not extra hardware.

The host engine must not be in a swarm; the bench makes and leaves its swarms (as the tests do).
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.sandbox.contract import SandboxSpec  # noqa: E402
from harness.sandbox.registry import get_provider  # noqa: E402
from harness.sandbox.swarm import nodecheck  # noqa: E402
from tests.helpers.swarm import single_node_swarm, swarm_state, two_node_swarm  # noqa: E402

DOCKER, SWARM = get_provider("docker"), get_provider("swarm")


def timed_start(provider, image: str, run_id: str, index: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    sb = provider.start(SandboxSpec(image=image, run_id=run_id, instance_id=f"lat-{index}"))
    started = time.perf_counter() - t0
    if sb.shell("echo hi").stdout != "hi\n":
        raise RuntimeError(f"{provider.name}: sandbox did not answer")
    t1 = time.perf_counter()
    provider.teardown(sb)
    return started, time.perf_counter() - t1


def latency(image: str, rounds: int) -> None:
    run_id = f"bench-{secrets.token_hex(3)}"
    results = {"docker": ([], []), "swarm": ([], [])}
    try:
        timed_start(DOCKER, image, run_id, -1)  # warm-up
        timed_start(SWARM, image, run_id, -2)
        for i in range(rounds):
            order = (DOCKER, SWARM) if i % 2 == 0 else (SWARM, DOCKER)
            for provider in order:
                start, stop = timed_start(provider, image, run_id, i)
                results[provider.name][0].append(start)
                results[provider.name][1].append(stop)
    finally:
        DOCKER.cleanup(run_id=run_id)
        SWARM.cleanup(run_id=run_id)
    med = {name: (statistics.median(s), statistics.median(t)) for name, (s, t) in results.items()}
    print(f"\n1. sandbox start latency, median of {rounds} rounds (start until sandboxd answers; teardown)")
    for name, (start, stop) in med.items():
        print(f"   {name:7s} start {start * 1000:7.0f} ms   teardown {stop * 1000:7.0f} ms")
    print(f"start latency ratio swarm/docker: {med['swarm'][0] / med['docker'][0]:.2f}")
    checks = [nodecheck.check_nodes(image, "none", timeout=120) for _ in range(3)]
    print(f"   preflight node check (1 node), median of 3: {statistics.median(checks) * 1000:.0f} ms")


STARTS: dict[str, list[float]] = {}  # node id -> start latencies of the throughput runs


def throughput(image: str, instances: int, workers: int) -> tuple[float, list[float]]:
    run_id = f"bench-{secrets.token_hex(3)}"
    STARTS.clear()

    reaper = ThreadPoolExecutor(workers)  # as the runner does: removals in the background

    def one(i: int) -> float:
        t0 = time.perf_counter()
        sb = SWARM.start(SandboxSpec(image=image, run_id=run_id, instance_id=f"tp-{i}", cpus=0.5))
        try:
            STARTS.setdefault(sb.node_id, []).append(time.perf_counter() - t0)
            if sb.shell("true").exit_code != 0:
                raise RuntimeError("command failed")
        finally:
            reaper.submit(SWARM.teardown, sb)
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    try:
        with ThreadPoolExecutor(workers) as pool:
            each = list(pool.map(one, range(instances)))
        reaper.shutdown(wait=True)  # every sandbox removed before the clock stops
    finally:
        reaper.shutdown(wait=True)
        SWARM.cleanup(run_id=run_id)
    return instances / (time.perf_counter() - t0), each


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--instances", type=int, default=24)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--no-two-nodes", action="store_true")
    args = parser.parse_args()
    if swarm_state().get("LocalNodeState") != "inactive":
        print("the host engine is in a swarm already; the bench makes its own (docker swarm leave first)")
        return 2
    image = DOCKER.preflight(log=lambda m: None)
    with single_node_swarm():
        SWARM.preflight(log=lambda m: None)
        latency(image, args.rounds)
        one_rate, one_each = throughput(image, args.instances, args.workers)
    print(f"\n2. no-op agent throughput: {args.instances} instances, {args.workers} at a time (start, 1 command, "
          f"teardown in the background)")
    print(f"   1-node swarm: {one_rate:.2f} instances/s (median instance {statistics.median(one_each):.2f} s)")
    if args.no_two_nodes:
        return 0
    from tests.helpers.engines import SecondEngine

    worker = SecondEngine("swarm-worker")
    shutil.rmtree(worker.data_root / "swarm", ignore_errors=True)  # a killed session's swarm state
    with worker, two_node_swarm(worker, image) as ids:
        SWARM.preflight(log=lambda m: None)
        spent = [nodecheck.check_nodes(image, "none", timeout=120) for _ in range(3)]
        two_rate, two_each = throughput(image, args.instances, args.workers)
    print(f"   2-node swarm: {two_rate:.2f} instances/s (median instance {statistics.median(two_each):.2f} s)")
    for role, node_id in ids.items():
        starts = STARTS.get(node_id, [])
        if starts:
            print(f"     sandbox start on the {role}: median {statistics.median(starts) * 1000:.0f} ms "
                  f"({len(starts)} sandboxes, {args.workers} starting at a time)")
    print(f"throughput ratio 2-node/1-node: {two_rate / one_rate:.2f}")
    print(f"   preflight node check (2 nodes), median of 3: {statistics.median(spent) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
