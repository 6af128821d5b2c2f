"""A scripted model that answers wrong with a known probability (for noise measurements).

    with FlakyModel({"What is 6*7?": "42"}, p_wrong=0.3, seed=1) as server:
        server.base_url

Every chat completion (the preflight's probe aside) is an answer `<solution>X</solution>`: X is the right
answer of the first known question found in the request's messages, or, with probability `p_wrong` (drawn
from a generator seeded with `seed`, so a test is the same every time), "wrong". A request naming no known
question is answered "wrong". `server.draws` lists each answer's (question, right) in order.
"""

from __future__ import annotations

import random
import threading
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
