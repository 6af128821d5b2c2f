"""Gaia2: a scenario's start to its first tool call in our sandbox vs ARE on the host, and oracle throughput.

  .venv/bin/python bench/gaia2.py [--rounds N] [--epochs E] [--oracle-rounds R] [--workers 1,2,4]
                                  [--skip-start] [--skip-oracle]  # defaults: 5, 4, 2, 1,2,4

1. Start to first tool call (median of N per side, interleaved, the order alternating every round; the three
   smoke scenarios in turn, the same one on both sides of a round):
   host:    ARE's own driver (images/gaia2/gaia2_driver.py) run by a host virtual environment with ARE pinned
            as images/gaia2/ pins it, over MCP on stdio (the MCP SDK's stdio client): process start -> the
            scenario imported, preprocessed, its env running (the driver answers `initialize` only then) ->
            `list_tools` -> the first `call_tool` (`harness__task`, the first user message) answered.
   sandbox: the same steps as a run makes them: a gaia2 sandbox started, the scenario copied in, the driver
            started through the harness's MCP bridge (mcp_tools.connect), `list_tools`, `harness__task`.
   The host venv is made once (HARNESS_BENCH_ARE_VENV, default ~/.cache/harness-bench/are-venv); if it cannot
   be made, the host side is reported as not run.
2. Oracle throughput: `harness run --agent oracle --model replay --scorer gaia2` over datasets/gaia2-smoke with
   --epochs E (3 scenarios x 4 = 12 instances: whole waves at 1, 2 and 4 workers), instances/s of the whole
   command at each worker count, and its ratio to workers=1.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMOKE = REPO / "datasets" / "gaia2-smoke"
SCENARIOS = ["proto_find_image_file.json", "proto_forward_email.json", "proto_multi_turn.json"]
IMAGE_DIR = REPO / "images" / "gaia2"
ARE_PIN = "meta-agents-research-environments==1.2.0"  # as images/gaia2/Dockerfile pins it
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# The image's environment for the driver (images/gaia2/Dockerfile): ARE offline, no Hub, no cost map download.
ARE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
START_TARGET = 1.5  # sandbox / host, start to first tool call
SCALING_SHARE = 0.8  # instances/s at W workers >= 0.8 x min(W, CPUs) x workers=1's


def verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


def are_venv(log=print) -> Path | None:
    """ARE's host environment, made once and reused while the pin and constraints.txt are unchanged; None when
    it cannot be made (the reason is logged)."""
    root = Path(os.environ.get("HARNESS_BENCH_ARE_VENV", Path.home() / ".cache" / "harness-bench" / "are-venv"))
    stamp = hashlib.sha256((ARE_PIN + (IMAGE_DIR / "constraints.txt").read_text()).encode()).hexdigest()
    if (root / "harness-stamp").is_file() and (root / "harness-stamp").read_text() == stamp:
        return root
    log(f"making ARE's host venv in {root} ({ARE_PIN}, images/gaia2/constraints.txt) ...")
    building = root.with_name(root.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    env = dict(os.environ)
    if "PIP_CERT" not in env and os.path.isfile(CA_BUNDLE):
        env["PIP_CERT"] = CA_BUNDLE  # a proxy with its own CA, if any, is trusted through the system bundle
    steps = [[sys.executable, "-m", "venv", str(building)],
             [str(building / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", ARE_PIN,
              "-c", str(IMAGE_DIR / "constraints.txt")]]
    for argv in steps:
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            log(f"  failed ({' '.join(argv[:3])} ...): {(done.stderr or done.stdout).strip()[-800:]}")
            shutil.rmtree(building, ignore_errors=True)
            return None
    (building / "harness-stamp").write_text(stamp)
    shutil.rmtree(root, ignore_errors=True)
    building.rename(root)
    return root


def first_text(result) -> str:
    if result.is_error or not result.content or result.content[0].type != "text":
        raise RuntimeError(f"harness__task failed: {result.content}")
    return result.content[0].text


async def first_call(session) -> str:
    """What `environments/gaia2.serving` does before the agent's first call: list the tools, ask the task."""
    tools = (await session.list_tools()).tools
    if not any(tool.name == "harness__task" for tool in tools):
        raise RuntimeError("the driver lists no harness__task")
    return first_text(await session.call_tool("harness__task", {}))


async def host_side(venv: Path, scenario: str, files: Path) -> tuple[float, float, str]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, **ARE_ENV, "DEMO_FS_PATH": str(files), "FS_PATH": str(files)}
    params = StdioServerParameters(command=str(venv / "bin" / "python"), env=env,
                                   args=[str(IMAGE_DIR / "gaia2_driver.py"), str(SMOKE / scenario), "--judge", "hard"])
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        task = await first_call(session)
        took = time.perf_counter() - started
        return took, took, task


async def sandbox_side(provider, image: str, run_id: str, scenario: str, round_: int) -> tuple[float, float, str]:
    """Seconds from the sandbox's start and from the driver's (the sandbox up, the scenario in) to the answer."""
    from harness.benchmarks.gaia2.environment import Gaia2Env
    from harness.environments.mcp_tools import connect
    from harness.sandbox.contract import SandboxSpec

    spec = SandboxSpec(image=image, run_id=run_id, instance_id=f"gaia2-{round_}")
    started = time.perf_counter()
    sandbox = await asyncio.to_thread(provider.start, spec)
    try:
        await asyncio.to_thread(sandbox.copy_in, SMOKE, [scenario])
        ready = time.perf_counter()
        async with AsyncExitStack() as stack:
            session = await connect(stack, Gaia2Env(f"/workspace/{scenario}", sandbox).server(), sandbox, None)
            task = await first_call(session)
            answered = time.perf_counter()
        return answered - started, answered - ready, task
    finally:
        await asyncio.to_thread(provider.teardown, sandbox)


def bench_start(provider, image: str, run_id: str, venv: Path | None, rounds: int) -> tuple[list, list, list]:
    """Seconds to the first answer: the sandbox side's, its driver part's, the host's."""
    ours, driver, theirs = [], [], []
    with tempfile.TemporaryDirectory() as files:
        for i in range(rounds):
            scenario = SCENARIOS[i % len(SCENARIOS)]
            sides = [("sandbox", functools.partial(sandbox_side, provider, image, run_id, scenario, i))]
            if venv is not None:
                sides.append(("host", functools.partial(host_side, venv, scenario, Path(files))))
            if i % 2:
                sides.reverse()
            tasks = {}
            for name, side in sides:
                took, part, tasks[name] = asyncio.run(side())
                if name == "sandbox":
                    ours.append(took)
                    driver.append(part)
                else:
                    theirs.append(took)
            if len(set(tasks.values())) != 1:
                raise RuntimeError(f"{scenario}: the two sides' first messages differ: {tasks}")
            print(f"  round {i + 1} {scenario}: " + "  ".join(f"{n} {t:.2f} s" for n, t in
                  [("sandbox", ours[-1])] + ([("host", theirs[-1])] if venv else [])))
    return ours, driver, theirs


def oracle_run(workers: int, epochs: int, out: Path) -> float:
    """Instances/s of one whole `harness run` of the oracle over the smoke set; every row must pass ARE's judge."""
    argv = [sys.executable, "-m", "harness", "run", "--dataset", str(SMOKE), "--agent", "oracle", "--model", "replay",
            "--scorer", "gaia2", "--epochs", str(epochs), "--workers", str(workers), "--output-dir", str(out)]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"harness run exited {done.returncode}:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "output.jsonl").read_text().splitlines()]
    want = len(SCENARIOS) * epochs
    bad = [(r["instance_id"], r["epoch"]) for r in rows if r["status"] != "ok" or r["correct"] is not True]
    if len(rows) != want or bad:
        raise RuntimeError(f"harness run: {len(rows)} rows of {want}, not passed: {bad[:5]}")
    return want / wall


def bench_oracle(workers: list[int], epochs: int, rounds: int) -> dict[int, list[float]]:
    rates: dict[int, list[float]] = {w: [] for w in workers}
    with tempfile.TemporaryDirectory() as root:
        for r in range(rounds):
            for w in (workers if r % 2 == 0 else workers[::-1]):
                rates[w].append(oracle_run(w, epochs, Path(root) / f"r{r}-w{w}"))
                print(f"  round {r + 1} w={w}: {rates[w][-1]:.3f} instances/s")
    return rates


def report_start(ours: list[float], driver_part: list[float], theirs: list[float]) -> None:
    med = statistics.median(ours)
    print(f"start to first tool call, sandbox: median {med:.2f} s (min {min(ours):.2f}, max {max(ours):.2f})")
    driver = statistics.median(driver_part)
    print(f"  of which the driver (bridge, ARE's start, first call): median {driver:.2f} s; "
          f"sandbox start + copy-in {med - driver:.2f} s")
    if not theirs:
        print("start to first tool call, host: NOT RUN (ARE's host venv could not be made); no ratio")
        return
    base = statistics.median(theirs)
    print(f"start to first tool call, host:    median {base:.2f} s (min {min(theirs):.2f}, max {max(theirs):.2f})")
    ratio = med / base
    print(f"  driver part ratio sandbox/host {driver / base:.2f}")
    print(f"start ratio sandbox/host {ratio:.2f} (+{med - base:.2f} s)  target <= {START_TARGET}  "
          f"{verdict(ratio <= START_TARGET)}")


def report_oracle(rates: dict[int, list[float]], epochs: int) -> None:
    base = statistics.median(rates[min(rates)])
    cpus = os.cpu_count() or 1
    for w, got in rates.items():
        rate = statistics.median(got)
        line = f"oracle w={w}: {rate:.3f} instances/s ({len(SCENARIOS) * epochs} per run)  ratio to w={min(rates)} " \
               f"{rate / base:.2f}"
        if w != min(rates):
            target = SCALING_SHARE * min(w, cpus) / min(min(rates), cpus)
            line += f"  target >= {target:.2f}  {verdict(rate / base >= target)}"
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="first-call rounds per side")
    parser.add_argument("--epochs", type=int, default=4, help="epochs of the smoke set per oracle run")
    parser.add_argument("--oracle-rounds", type=int, default=2, help="oracle runs per worker count")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--skip-start", action="store_true")
    parser.add_argument("--skip-oracle", action="store_true")
    args = parser.parse_args()
    try:
        workers = sorted({int(w) for w in args.workers.split(",")})
    except ValueError:
        parser.error(f"--workers: {args.workers!r} is not a comma-separated list of integers")
    if args.rounds < 1 or args.epochs < 1 or args.oracle_rounds < 1 or min(workers) < 1:
        parser.error("--rounds, --epochs, --oracle-rounds and every --workers must be >= 1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind through the finally below

    from harness.sandbox.registry import get_provider

    provider = get_provider("docker")
    provider.preflight()
    image = provider.image_of("gaia2", log=lambda m: print(m, file=sys.stderr))
    run_id = f"bench-{secrets.token_hex(3)}"
    load = os.getloadavg()
    print(f"image {image}  run {run_id}  {os.cpu_count()} CPUs  load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    try:
        if not args.skip_start:
            venv = are_venv()
            print(f"start to first tool call: {args.rounds} rounds, host venv {venv or 'NOT MADE'}")
            report_start(*bench_start(provider, image, run_id, venv, args.rounds))
        if not args.skip_oracle:
            print(f"oracle throughput: workers {workers}, --epochs {args.epochs}, {args.oracle_rounds} round(s)")
            report_oracle(bench_oracle(workers, args.epochs, args.oracle_rounds), args.epochs)
    finally:
        left = len(provider.cleanup(run_id=run_id))
        if left:
            print(f"removed {left} leftover container(s) of {run_id}", file=sys.stderr)
        load = os.getloadavg()
        print(f"load at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("interrupted")
