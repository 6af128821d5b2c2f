"""ARE's own offline judge on a `harness export --format gaia2` folder, run inside the gaia2 image with ARE's
interpreter (tests/test_gaia2_rejudge.py):

    /opt/are/bin/python are_judge.py FOLDER ENDPOINT OUT CONFIG...

For each config, ARE's `are-benchmark judge --hf FOLDER --hf-config CONFIG --hf-split validation` (its CLI's own
`main`, in this process), its soft checks asked of the OpenAI-compatible ENDPOINT (ARE's `local` provider:
LiteLLM). Twice: as ARE 1.2.0 ships it, then with its LLM checkers reading a verdict whatever its case, as ARE's
later gaia2-cli judge reads it (ARE 1.2.0's engines lower-case True and False in every reply, so a checker that
looks for `[[True]]` never finds it). Writes OUT/verdicts.json: {"stock": [...], "cased": [...]}, the rows of
ARE's output.jsonl, config by config. Needs the harness nowhere: ARE alone, and the driver's speed-up (its prompt
templates rendered once each: `render_once`, which changes no prompt)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def judge(folder: str, endpoint: str, out: Path, configs: list[str]) -> list[dict]:
    from are.simulation.benchmark.cli import main

    found = []
    for config in configs:
        where = out / config
        main.main(["judge", "--hf", folder, "--hf-config", config, "--hf-split", "validation",
                   "--output_dir", str(where), "--executor_type", "thread", "--judge_provider", "local",
                   "--judge_model", "openai/judge", "--judge_endpoint", endpoint], standalone_mode=False)
        found += [json.loads(line) for line in (where / "output.jsonl").read_text().splitlines() if line.strip()]
    return found


def render_once() -> None:
    """ARE's judge renders ~4,100 static prompt templates per scenario it judges (2-6 s of CPU each time): rendered
    once each, by the driver's own speed-up (images/gaia2/gaia2_driver.py, at /opt/harness in the image)."""
    sys.path.insert(0, "/opt/harness")
    from gaia2_driver import _speed_up_judge_init

    _speed_up_judge_init()


def read_any_case() -> None:
    """ARE's LLM checkers, reading `[[True]]` in a reply whatever its case."""
    from are.simulation.validation.utils import llm_utils

    def checked(self, user_prompt_args):
        votes = []
        for _ in range(self.num_votes):
            reply = self.judge(user_prompt_args)
            if reply is None:
                continue
            if self.success_str.lower() in reply.lower():
                votes.append(True)
            elif self.failure_str.lower() in reply.lower():
                votes.append(False)
        return sum(votes) >= len(votes) / 2 if votes else None

    llm_utils.LLMChecker.__call__ = checked


if __name__ == "__main__":
    folder, endpoint, out, *configs = sys.argv[1:]
    render_once()
    stock = judge(folder, endpoint, Path(out) / "stock", configs)
    read_any_case()
    cased = judge(folder, endpoint, Path(out) / "cased", configs)
    (Path(out) / "verdicts.json").write_text(json.dumps({"stock": stock, "cased": cased}))
