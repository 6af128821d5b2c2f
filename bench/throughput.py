"""Throughput of `harness run` against the raw-SDK ceiling, warm vs cold start, 100k bookkeeping.

  .venv/bin/python bench/throughput.py [--rounds R] [--instances N] [--workers 1,2,4,8]
                                       [--skip-warm-pool] [--skip-bookkeeping]

1. No-op throughput (instances/s) at each worker count, harness and raw interleaved, R rounds:
   harness: `harness run` of N instances (one small attachment each), replay model, agent
            bench.noop:NoopRunner (one command, then the answer); timed as the whole command.
   raw:     a pool of that many threads, each instance: create + start the sandbox image with the
            harness's own create options (limits, tmpfs, network, published port), poll sandboxd's
            /health, upload the same file, run the same command, remove(force, v).
   Then the fixed cost of one `harness run` (a resume with nothing to do), and the harness once with
   HARNESS_AGENT_FORK=0 at 4 workers (no fork server). N defaults to 60: long enough that the
   per-instance rate, not the command's start-up, decides (see bench/README.md).
2. WarmPool.take vs provider.start (median of --takes), if harness/runner/pool.py exists.
3. 100k-instance bookkeeping: dataset load cold/warm and a resume with nothing to do (seconds, max RSS).
See bench/README.md.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import urllib3

from harness.datasets import cache as dataset_cache
from harness.sandbox.contract import SandboxSpec
from harness.sandbox.docker import naming, networks, ports, sockets
from harness.sandbox.docker.provider import _create_kwargs
from harness.sandbox.registry import get_provider
from harness.sandbox.service import TOKEN_HEADER
from harness.sandbox.unix_http import UnixConnectionPool

REPO = Path(__file__).resolve().parent.parent
HARNESS = [str(REPO / ".venv" / "bin" / "harness"), "run"]
PROVIDER = get_provider("docker")
FILE_NAME, FILE_TEXT, ANSWER = "data.txt", "x\n", "x"
COMMAND = f"cat /workspace/{FILE_NAME}"
WARM_TARGET, SECONDS_TARGET, RSS_TARGET_MB = 0.25, 3.0, 300
RATIO_TARGET, FIXED_TARGET = 1.0, 0.6  # harness/raw at every worker count; seconds of a run with nothing to do


def verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


def write_dataset(root: Path, ids: list[str]) -> Path:
    """A plain .jsonl dataset, each instance with the same small attachment, and its replay file
    (one turn per instance that answers at once; NoopRunner does not call the model)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / FILE_NAME).write_text(FILE_TEXT)
    with open(root / "data.jsonl", "w") as rows, open(root / "replay.jsonl", "w") as replay:
        for iid in ids:
            row = {"instance_id": iid, "question": "noop", "answer": ANSWER, "files": [FILE_NAME]}
            rows.write(json.dumps(row) + "\n")
            turns = [{"content": f"<solution>{ANSWER}</solution>"}]
            replay.write(json.dumps({"instance_id": iid, "turns": turns}) + "\n")
    return root / "data.jsonl"


def harness_side(dataset: Path, out: Path, workers: int, n: int, fork: bool = True, extra=()) -> tuple[float, float]:
    """Seconds of the whole `harness run` command, and from its first row to its last (rows are
    watched as they are appended: the rows' own timestamps have 1 s resolution)."""
    env = {**os.environ, "HARNESS_AGENT_FORK": "1" if fork else "0"}
    argv = HARNESS + ["--dataset", str(dataset), "--model", "replay", "--output-dir", str(out),
                      "--agent", "bench.noop:NoopRunner", "--workers", str(workers), "--scorer", "exact", *extra]
    output, seen, first, last = out / "output.jsonl", 0, None, None
    started = time.perf_counter()
    log = tempfile.TemporaryFile()  # not a pipe: nobody reads it while the run goes
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    while proc.poll() is None:
        try:
            count = output.read_bytes().count(b"\n")
        except FileNotFoundError:
            count = 0
        if count > seen:
            now = time.perf_counter()
            first, last, seen = first or now, now, count
        time.sleep(0.005)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        log.seek(0)
        raise RuntimeError(f"harness run exited {proc.returncode}:\n{log.read()[-3000:].decode(errors='replace')}")
    log.close()
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    bad = [r["instance_id"] for r in rows if r["status"] != "ok" or r["answer"] != ANSWER]
    if len(rows) != n or bad:
        raise RuntimeError(f"harness run: {len(rows)} rows of {n}, wrong: {bad[:5]}")
    return wall, (last - first) if last and first else float("nan")


def raw_instance(client: docker.DockerClient, image: str, run_id: str, iid: str, archive: bytes,
                 unix: bool = False) -> None:
    """unix: the harness's socket transport (no network, sandboxd's socket handed over by the harness:
    sockets.take), else a published port on the harness's `none` network."""
    spec = SandboxSpec(image=image, run_id=run_id, instance_id=iid)
    token, name = secrets.token_urlsafe(24), naming.container_name(run_id, iid, 0)
    kwargs = _create_kwargs(spec, name, token, unix=unix)
    container = client.containers.create(**kwargs) if unix else client.containers.create(
        ports=ports.publish(None), **kwargs)
    try:
        container.start()
        if unix:
            private = sockets.take(name, 30, lambda: None)
            http: urllib3.HTTPConnectionPool = UnixConnectionPool(private, retries=False, maxsize=1)
        else:
            container.reload()
            http = urllib3.HTTPConnectionPool(ports.bind_address(), ports.read_port(container.attrs),
                                              retries=False, maxsize=1)
        headers = {TOKEN_HEADER: token}
        delay, deadline = 0.005, time.monotonic() + 30
        while True:  # the same readiness poll as ServiceClient.wait_ready
            try:
                if http.request("GET", "/health", headers=headers, timeout=urllib3.Timeout(1.0, 2.0)).status == 200:
                    break
            except urllib3.exceptions.HTTPError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 1.5, 0.1)
        resp = http.urlopen("POST", "/upload?dest=/workspace", body=archive,
                            headers={**headers, "Content-Length": str(len(archive))})
        if resp.status != 200:
            raise RuntimeError(f"upload: {resp.status} {resp.data[:200]!r}")
        payload = {"argv": ["bash", "-c", COMMAND], "timeout": 60, "cwd": "/workspace"}
        resp = http.urlopen("POST", "/exec", body=json.dumps(payload).encode(), headers=headers)
        if resp.status != 200 or json.loads(resp.data)["stdout"] != FILE_TEXT:
            raise RuntimeError(f"exec: {resp.status} {resp.data[:200]!r}")
        http.close()
    finally:
        container.remove(force=True, v=True)
        if unix:
            sockets.remove(name)


def raw_side(client, image: str, run_id: str, workers: int, n: int, tag: str,
             unix: bool = False) -> tuple[float, float]:
    """Seconds of the whole pool, and from the first instance done to the last."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(FILE_NAME)
        info.size = len(FILE_TEXT)
        tar.addfile(info, io.BytesIO(FILE_TEXT.encode()))
    archive = buffer.getvalue()
    done: list[float] = []

    def one(i: int) -> None:
        raw_instance(client, image, run_id, f"{tag}-{i}", archive, unix)
        done.append(time.perf_counter())

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(n)))
    return time.perf_counter() - started, max(done) - min(done)


def throughput(args, image: str, run_id: str, tmp: Path) -> None:
    client = docker.from_env(max_pool_size=32)
    n = args.instances
    dataset = write_dataset(tmp / "ds", [f"i{i}" for i in range(n)])
    harness_side(dataset, tmp / "warmup", 2, n)  # caches the dataset, warms the engine and page cache
    raw_side(client, image, run_id, 2, 4, "warmup")
    raw_side(client, image, run_id, 2, 4, "warmup-unix", unix=True)
    ours: dict[int, list[tuple[float, float]]] = {w: [] for w in args.workers}
    raw: dict[int, list[tuple[float, float]]] = {w: [] for w in args.workers}
    same: dict[int, list[tuple[float, float]]] = {w: [] for w in args.workers}  # raw over the socket transport
    for r in range(args.rounds):
        for w in args.workers:
            sides = [lambda r=r, w=w: ours[w].append(harness_side(dataset, tmp / f"r{r}w{w}", w, n)),
                     lambda r=r, w=w: raw[w].append(raw_side(client, image, run_id, w, n, f"r{r}w{w}")),
                     lambda r=r, w=w: same[w].append(raw_side(client, image, run_id, w, n, f"r{r}w{w}u", True))]
            turn = (r + w) % 3  # rotate who goes first
            for side in sides[turn:] + sides[:turn]:
                side()
    print(f"throughput, {n} instances x {args.rounds} rounds, instances/s, median of rounds. "
          f"harness: N / the whole `harness run`; raw: N / the whole pool; steady: (N-1) / first to last done")

    def rates(xs: list[tuple[float, float]]) -> tuple[float, float]:
        return n / statistics.median(x[0] for x in xs), (n - 1) / statistics.median(x[1] for x in xs)

    for w in args.workers:
        (h, hs), (rw, rs) = rates(ours[w]), rates(raw[w])
        print(f"throughput w={w}: harness {h:.2f}/s raw {rw:.2f}/s ratio {h / rw:.2f}   "
              f"({verdict(h / rw >= RATIO_TARGET)} >= {RATIO_TARGET:g})")
        print(f"  steady w={w}: harness {hs:.2f}/s raw {rs:.2f}/s ratio {hs / rs:.2f}   (walls: harness "
              f"{' '.join(f'{x[0]:.1f}s' for x in ours[w])}, raw {' '.join(f'{x[0]:.1f}s' for x in raw[w])})")
        (u, us) = rates(same[w])
        print(f"  same transport w={w}: raw over the socket {u:.2f}/s ratio {h / u:.2f} (steady {us:.2f}/s, "
              f"ratio {hs / us:.2f}): the harness's own cost against a raw loop that also skips the network")
    idle = statistics.median(harness_side(dataset, tmp / "warmup", 2, n)[0] for _ in range(3))
    print(f"fixed cost: `harness run` with nothing to do (a resume of a finished run; start-up, preflight, "
          f"bookkeeping, report) {idle:.2f} s   ({verdict(idle <= FIXED_TARGET)} <= {FIXED_TARGET:g} s)"
          + (f", {idle / statistics.median(x[0] for x in ours[4]):.0%} of the whole command at w=4"
             if 4 in ours else ""))
    if 4 in ours:
        h, hs = rates([harness_side(dataset, tmp / "nofork", 4, n, fork=False)])
        f, fs = rates(ours[4])
        print(f"fork server w=4: HARNESS_AGENT_FORK=0 {h:.2f}/s (steady {hs:.2f}/s) vs fork server {f:.2f}/s "
              f"(steady {fs:.2f}/s) ratio fork/no-fork {f / h:.2f}")
        if (REPO / "harness" / "runner" / "pool.py").exists():
            h, hs = rates([harness_side(dataset, tmp / "warm", 4, n, extra=("--warm-pool", "4"))])
            print(f"warm pool w=4: --warm-pool 4 {h:.2f}/s (steady {hs:.2f}/s) vs without {f:.2f}/s "
                  f"(steady {fs:.2f}/s) ratio {h / f:.2f}")


def warm_pool(args, image: str, run_id: str) -> None:
    try:
        from harness.runner.pool import WarmPool
    except ImportError:
        print("warm pool: not available")
        return
    spec = SandboxSpec(image=image, run_id=run_id, instance_id="warm")
    pool = WarmPool(PROVIDER, spec, 3)
    warm, cold, misses = [], [], 0
    try:
        time.sleep(3)  # let it fill
        while len(warm) < args.takes:
            started = time.perf_counter()
            try:
                sb = pool.take(spec)
            except TypeError:  # take() without the spec
                sb = pool.take()
            elapsed = time.perf_counter() - started
            if sb is None:
                misses += 1
                time.sleep(0.5)
                continue
            if sb.shell("echo hi").stdout != "hi\n":  # untimed: the pool's sandbox answers
                raise RuntimeError("a warm sandbox did not answer")
            warm.append(elapsed)
            started = time.perf_counter()
            cold_sb = PROVIDER.start(spec.model_copy(update={"instance_id": "cold"}))
            cold.append(time.perf_counter() - started)
            for s in (sb, cold_sb):
                PROVIDER.teardown(s)
            time.sleep(1.0)  # refill
    finally:
        pool.close()
    w, c = statistics.median(warm) * 1000, statistics.median(cold) * 1000
    print(f"warm start {w:.1f} ms cold start {c:.1f} ms ratio {w / c:.3f}   "
          f"({verdict(w / c <= WARM_TARGET)} <= {WARM_TARGET}; median of {len(warm)}, "
          f"empty takes {misses})")


def measured(argv: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds and max RSS (MB) of one command, from /usr/bin/time -v."""
    started = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", *argv], cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    kb = next(int(line.split(":")[1]) for line in proc.stderr.splitlines() if "Maximum resident" in line)
    return wall, kb / 1024


def bookkeeping(tmp: Path, count: int = 100_000) -> None:
    root, out, state = tmp / "big", tmp / "big-run", tmp / "state"
    root.mkdir()
    (root / "shared.txt").write_text("shared attachment\n")
    with open(root / "data.jsonl", "w") as rows, open(root / "replay.jsonl", "w") as replay:
        for i in range(count):
            row = {"instance_id": f"i{i}", "question": f"question {i}", "answer": str(i)}
            if i % 2 == 0:
                row["files"] = ["shared.txt"]
            rows.write(json.dumps(row) + "\n")
            turns = [{"content": f"<solution>{i}</solution>"}]
            replay.write(json.dumps({"instance_id": f"i{i}", "turns": turns}) + "\n")
    env = {**os.environ, "HARNESS_STATE_DIR": str(state)}
    argv = HARNESS + ["--dataset", str(root / "data.jsonl"), "--model", "replay", "--output-dir", str(out),
                      "--agent", "plain", "--workers", "2", "--scorer", "exact"]
    subprocess.run(argv + ["--ids", "i0,i1"], cwd=REPO, env=env, check=True, capture_output=True)
    lines = (out / "output.jsonl").read_text().splitlines()
    template = json.loads(lines[0])
    with open(out / "output.jsonl", "a") as f:
        for i in range(2, count):
            row = {**template, "instance_id": f"i{i}", "answer": str(i), "target": str(i)}
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
    resume = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)  # rebuilds the report
    if resume.returncode != 0:
        raise RuntimeError(f"first resume exited {resume.returncode}: {resume.stdout[-1500:]} {resume.stderr[-1500:]}")
    load = [sys.executable, "-c",
            f"from harness.datasets import load_dataset; load_dataset({str(root / 'data.jsonl')!r})"]
    shutil.rmtree(state / "datasets", ignore_errors=True)
    figures = [("load cold", measured(load, env)), ("load warm", measured(load, env)),
               ("resume, nothing to do", measured(argv, env))]
    if (rows := (out / "output.jsonl").read_bytes().count(b"\n")) != count:
        raise RuntimeError(f"the resume was not a no-op: {rows} rows, expected {count}")
    for what, (secs, mb) in figures:
        print(f"100k {what}: {secs:.2f} s {mb:.0f} MB   "
              f"({verdict(secs < SECONDS_TARGET and mb < RSS_TARGET_MB)} < {SECONDS_TARGET:g} s, < {RSS_TARGET_MB} MB)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--instances", type=int, default=60,
                        help="instances per harness run / raw pool (a run long enough that throughput, not start-up, "
                             "decides; the fixed-cost line gives the start-up)")
    parser.add_argument("--workers", default="1,2,4,8", help="comma-separated worker counts")
    parser.add_argument("--takes", type=int, default=10, help="warm/cold starts measured")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-warm-pool", action="store_true")
    parser.add_argument("--skip-bookkeeping", action="store_true")
    args = parser.parse_args()
    args.workers = [int(w) for w in args.workers.split(",")]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind through the finally below
    image = PROVIDER.preflight(log=lambda *_: None)
    networks.ensure_isolated()
    run_id = f"bench-{secrets.token_hex(3)}"
    print(f"image {image}  run {run_id}  instances {args.instances}  rounds {args.rounds}  workers {args.workers}")
    try:
        with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
            if not args.skip_throughput:
                try:
                    throughput(args, image, run_id, Path(tmp))
                finally:  # the harness cached the temp dataset in the state dir
                    dataset_cache._entry(Path(tmp) / "ds" / "data.jsonl").unlink(missing_ok=True)
            if not args.skip_warm_pool:
                warm_pool(args, image, run_id)
            if not args.skip_bookkeeping:
                bookkeeping(Path(tmp))
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
