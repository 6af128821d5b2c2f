"""The cost of an image part: one model turn with a picture against the same turn without it.

    .venv/bin/python bench/images.py [--rounds N]   # default 20

Needs a running Docker engine (one sandbox). One real sandbox holds a photo-like 2400x1600 PNG; the
plain runner's model client (harness/models/chat.py: the official openai client, metered) sends the
same system and user message to the fake OpenAI server of the tests (tests/fakes/openai_server.py),
once as text alone and once with the picture as an `image_url` part, the two interleaved round by
round. The picture is made the way a vision model's task gets it: resized and re-encoded inside the
sandbox by ImageEnv (harness/environments/images.py), read out through the sandbox contract.

Printed: the request's size (bytes on the wire) and the turn's time (median, p90) of each side, and
the ratios image/text: request size, turn time, and turn time with the in-sandbox resize counted in
(what the first turn of a task with an image attachment pays). Against a real provider the time of
an image turn is mostly the provider's (vision tokens); these figures are the harness's own share.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TASK = "What is shown in the photo /workspace/photo.png? Answer in one word inside <solution></solution>."


def photo(path: Path) -> None:
    """A photo-like PNG: a gradient under noise (compresses like a photograph, not like a flat chart)."""
    from PIL import Image

    gradient = Image.linear_gradient("L").resize((2400, 1600))
    noise = Image.effect_noise((2400, 1600), 40)
    Image.merge("RGB", (gradient, noise, Image.blend(gradient, noise, 0.5))).save(path, "PNG")


def p90(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.9 * len(values))) - 1)]


async def rounds(n: int, images, base_url: str, server) -> dict[str, list[float]]:
    from harness.environments.images import openai_parts
    from harness.models.chat import OpenAIChat
    from harness.models.config import ModelSection
    from harness.models.meter import Meter

    model = OpenAIChat(ModelSection(name="bench", model="fake-model-1", base_url=base_url, max_retries=0),
                       Meter(max_tokens=None, max_steps=None))
    system = {"role": "system", "content": "You answer questions about pictures."}
    out: dict[str, list[float]] = {"text": [], "image": [], "resize": [], "text_bytes": [], "image_bytes": []}
    try:
        for number in range(n + 2):  # two warm-up rounds, not counted
            started = time.perf_counter()
            picture = await asyncio.to_thread(images.load, "photo.png")
            resized = time.perf_counter() - started
            sides = [("text", [system, {"role": "user", "content": TASK}]),
                     ("image", [system, {"role": "user", "content": openai_parts(TASK, [picture])}])]
            for side, messages in sides if number % 2 else sides[::-1]:
                started = time.perf_counter()
                await model.complete(messages, [])
                took = time.perf_counter() - started
                if number >= 2:
                    out[side].append(took)
                    out[f"{side}_bytes"].append(float(server.requests[-1]["headers"]["content-length"]))
            if number >= 2:
                out["resize"].append(resized)
    finally:
        await model.close()
    return out


def report(figures: dict[str, list[float]], picture) -> None:
    med = {k: statistics.median(v) for k, v in figures.items()}
    print(f"picture: {picture.width}x{picture.height} {picture.mime}, {len(picture.data)} bytes "
          f"(from 2400x1600, resized in the sandbox)")
    print(f"{'':>22} {'median':>10} {'p90':>10}")
    for side in ("text", "image"):
        print(f"{side + ' turn (ms)':>22} {med[side] * 1000:>10.1f} {p90(figures[side]) * 1000:>10.1f}")
    print(f"{'resize in sandbox (ms)':>22} {med['resize'] * 1000:>10.1f} {p90(figures['resize']) * 1000:>10.1f}")
    print(f"{'text request (bytes)':>22} {med['text_bytes']:>10.0f}")
    print(f"{'image request (bytes)':>22} {med['image_bytes']:>10.0f}")
    print("ratios image/text:")
    print(f"  request size               {med['image_bytes'] / med['text_bytes']:.1f}x")
    print(f"  turn time                  {med['image'] / med['text']:.2f}x")
    print(f"  turn time with the resize  {(med['image'] + med['resize']) / med['text']:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="turns per side (after 2 warm-up rounds)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")

    from harness.environments.images import ImageEnv
    from harness.sandbox.contract import SandboxSpec
    from harness.sandbox.registry import get_provider
    from harness.traces import Tracer
    from tests.fakes.openai_server import FakeOpenAI, text

    provider = get_provider("docker")
    image = provider.preflight()
    run_id = f"bench-{secrets.token_hex(3)}"
    print(f"image {image}  run {run_id}  rounds {args.rounds} (+2 warm-up)")
    try:
        with TemporaryDirectory() as folder, FakeOpenAI([], default=text("<solution>noise</solution>")) as server:
            photo(Path(folder) / "photo.png")
            with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="bench-images")) as sb:
                sb.copy_in(Path(folder), ["photo.png"])
                images = ImageEnv(sb, Tracer(None))
                figures = asyncio.run(rounds(args.rounds, images, server.base_url, server))
                report(figures, images.pictures[1])
    finally:
        if left := provider.cleanup(run_id=run_id):  # the sandbox's context removes it; this is a backstop
            print(f"removed {len(left)} leftover container(s) of {run_id}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
