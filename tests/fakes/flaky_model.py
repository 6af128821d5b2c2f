"""A scripted model that answers wrong with a known probability (for noise measurements).

    with FlakyModel({"What is 6*7?": "42"}, p_wrong=0.3, seed=1) as server:
        server.base_url

Every chat completion (the preflight's probe aside) is an answer `<solution>X</solution>`: X is the right
answer of the first known question found in the request's messages, or, with probability `p_wrong` (drawn
from a generator seeded with `seed`, so a test is the same every time), "wrong". A request naming no known
question is answered "wrong". `server.draws` lists each answer's (question, right) in order.

As a program (docs/results.md's worked example), it serves a GAIA-style folder's questions until Ctrl-C and
writes a `[llm.flaky]` section naming it (key variable FLAKY_KEY, any value):

    python -m tests.fakes.flaky_model datasets/gaia-smoke --p-wrong 0.25 --seed 2026 --config models.toml
"""

from __future__ import annotations

import argparse
import json
import random
import threading
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI, Item, text


class FlakyModel(FakeOpenAI):
    def __init__(self, answers: dict[str, str], *, p_wrong: float, seed: int = 0, **kwargs: Any):
        super().__init__([], default=text("unused"), **kwargs)
        self.answers, self.p_wrong = answers, p_wrong
        self._random = random.Random(seed)
        self._draw_lock = threading.Lock()
        self.draws: list[tuple[str, bool]] = []

    def respond_chat(self, body: Any, item: Item | None = None) -> tuple[int, Any, dict]:
        if item is not None:  # the probe
            return super().respond_chat(body, item)
        said = " ".join(str(m.get("content")) for m in (body or {}).get("messages", []) if isinstance(m, dict))
        question = next((q for q in self.answers if q in said), None)
        with self._draw_lock:
            right = question is not None and self._random.random() >= self.p_wrong
            self.draws.append((question or "", right))
        answer = self.answers[question] if right and question is not None else "wrong"
        return super().respond_chat(body, text(f"<solution>{answer}</solution>"))


def main() -> None:
    parser = argparse.ArgumentParser(description="A model that answers a GAIA-style folder's questions, wrong "
                                                 "with a known probability.")
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--p-wrong", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", type=Path, required=True, help="the [llm.flaky] section is written here")
    args = parser.parse_args()
    rows = [json.loads(line) for path in sorted(args.dataset.rglob("metadata.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    answers = {row["Question"][:80]: row["Final answer"] for row in rows}
    with FlakyModel(answers, p_wrong=args.p_wrong, seed=args.seed) as server:
        args.config.write_text(f'[llm.flaky]\nmodel = "flaky-1"\nbase_url = "{server.base_url}"\n'
                               'api_key_env = "FLAKY_KEY"\ntemperature = 0.7\nseed = 7\n')
        print(f"serving {len(answers)} questions at {server.base_url}, wrong with probability {args.p_wrong}; "
              f"wrote {args.config}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
