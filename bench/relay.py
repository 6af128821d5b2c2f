"""Benchmark a model call of an in-sandbox agent (`--agent sandbox:COMMAND`) against the same call made
directly from the host, in one run.

  .venv/bin/python bench/relay.py [--rounds N] [--calls M]   # defaults: 6, 25

One small program (CALLER: urllib, one chat completion after another, each timed with perf_counter)
makes M calls per block, N blocks on each side, the order of the sides alternating every round:
  relayed: inside a real sandbox (--network none) under the relay (harness/agents/sandboxed/relay.py),
           to the per-instance proxy on the host (proxy.py) and its metered OpenAI client, to the fake
           OpenAI server (tests/fakes/openai_server.py);
  direct:  on the host, to the same fake server.
The first call of every block is a warm-up, not counted. Prints p50 and p90 of each side, the ratios
relayed/direct and the time the relay and proxy add per call. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.agents.sandboxed.proxy import ModelProxy  # noqa: E402
from harness.agents.sandboxed.relay import ROOT, Relay, relayed  # noqa: E402
from harness.agents.sandboxed.runner import forward  # noqa: E402
from harness.models.chat import OpenAIChat  # noqa: E402
from harness.models.config import ModelSection  # noqa: E402
from harness.models.meter import Meter  # noqa: E402
from harness.sandbox.contract import Sandbox, SandboxSpec  # noqa: E402
from harness.sandbox.registry import get_provider  # noqa: E402
from harness.traces import Tracer  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, text  # noqa: E402

KEY_ENV, KEY = "BENCH_RELAY_KEY", "sk-bench-relay"
ANSWER = "<solution>4</solution>"
CALLER = r"""
import json, os, sys, time, urllib.request
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
headers = {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "2 + 2?"}]}).encode()
times = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers), timeout=60) as response:
        reply = json.load(response)
    times.append(time.perf_counter() - started)
    assert reply["choices"][0]["message"]["content"] == sys.argv[2], reply
print(json.dumps(times))
"""


def direct(base_url: str, calls: int) -> list[float]:
    """The caller on the host, straight to the fake server."""
    done = subprocess.run([sys.executable, "-c", CALLER, str(calls), ANSWER], capture_output=True, text=True,
                          env={"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": KEY}, timeout=300, check=True)
    return json.loads(done.stdout)[1:]


async def through_relay(sandbox: Sandbox, proxy: ModelProxy, calls: int, block: int) -> list[float]:
    """The caller inside the sandbox, its calls relayed to the proxy as `--agent sandbox:` runs them."""
    async def send(request: dict) -> dict:
        return await asyncio.to_thread(forward, proxy.url, request)

    async def unguarded(step):
        return await step

    env = {"OPENAI_API_KEY": proxy.token}
    done = await relayed(Relay(sandbox, f"{ROOT}/bench-{block}"), ["python3", "-c", CALLER, str(calls), ANSWER],
                         "", env, 300, send, lambda: proxy.stopped is not None, unguarded)
    if not done.ok or proxy.stopped is not None:
        raise RuntimeError(f"the relayed caller failed (exit {done.exit_code}): {proxy.stopped or done.stderr[-800:]}")
    return json.loads(done.stdout)[1:]


def q(values: list[float], pct: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


async def bench(rounds: int, calls: int) -> None:
    os.environ[KEY_ENV] = KEY
    provider = get_provider("docker")
    image = provider.preflight(network="none", log=lambda m: None)
    run_id = f"bench-relay-{secrets.token_hex(3)}"
    relayed_times: list[float] = []
    direct_times: list[float] = []
    try:
        with FakeOpenAI([], default=text(ANSWER)) as server, \
                provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="relay")) as sandbox:
            section = ModelSection(name="fake", model="fake-model-1", base_url=server.base_url, api_key_env=KEY_ENV,
                                   max_retries=0, timeout=60)
            chat = OpenAIChat(section, Meter(max_tokens=None, max_steps=None, tracer=Tracer(None)))
            proxy = ModelProxy(chat, secrets.token_urlsafe(24), section.model)
            proxy.start()
            try:
                for block in range(rounds):
                    if block % 2:
                        direct_times += direct(server.base_url, calls + 1)
                        relayed_times += await through_relay(sandbox, proxy, calls + 1, block)
                    else:
                        relayed_times += await through_relay(sandbox, proxy, calls + 1, block)
                        direct_times += direct(server.base_url, calls + 1)
            finally:
                proxy.close()
                await chat.close()
    finally:
        provider.cleanup(run_id=run_id)
    print(f"image {image}  run {run_id}  {rounds} rounds x {calls} calls per side (+1 warm-up per block)")
    for name, values in (("relayed", relayed_times), ("direct", direct_times)):
        print(f"  {name:<8} p50 {q(values, 50) * 1000:8.2f} ms   p90 {q(values, 90) * 1000:8.2f} ms")
    print(f"  ratio relayed/direct  p50 {q(relayed_times, 50) / q(direct_times, 50):.1f}x"
          f"   p90 {q(relayed_times, 90) / q(direct_times, 90):.1f}x")
    print(f"  added per call        p50 {(q(relayed_times, 50) - q(direct_times, 50)) * 1000:.1f} ms"
          f"   p90 {(q(relayed_times, 90) - q(direct_times, 90)) * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="blocks per side, order alternating")
    parser.add_argument("--calls", type=int, default=25, help="counted calls per block")
    args = parser.parse_args()
    if args.rounds < 1 or args.calls < 2:
        parser.error("--rounds must be >= 1 and --calls >= 2")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds, so the sandbox is removed
    asyncio.run(bench(args.rounds, args.calls))


if __name__ == "__main__":
    main()
