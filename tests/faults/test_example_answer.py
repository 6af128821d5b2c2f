"""The default prompt's example answer is copied (issue 29 item 11): `<solution>42</solution>` came back
for 8 of 8 instances from a real 0.5B model, and 42 is an answer a task can have, so nothing told the
copies from answers (MATH-500's example, `\\frac{3}{4}`, is the answer of one of the bundled tasks).

Then the example was a placeholder, `<solution>[your final answer]</solution>` (answers.EXAMPLE_ANSWER), and
the same model kept its brackets (issue 41 item 2): `[247]`, `[13, 14, 15]` in 6 of 9 answers, which GAIA's
scorer reads as no number. Now no benchmark's conventions show anything inside the answer tag; an answer
equal to the old placeholder is still counted (report.json `copied_example`), an answer wrapped in brackets
too (`bracketed`), each in the end-of-run table and warned of. The run is the real CLI against the
scripted OpenAI-compatible server (tests/fakes/openai_server.py), started by the test, whose model replays
what the real one wrote.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from harness import exit_codes
from harness.answers import EXAMPLE_ANSWER, bracketed, copies_example
from harness.benchmark import registered
from harness.datasets.load import load_dataset
from harness.datasets.model import Instance
from harness.runner.prompt import instruction
from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers.e2e import containers_of, explain, fake_config, harness, out_dir, remove_leftovers, rows, tasks_file

REPO = Path(__file__).resolve().parents[2]
TAGGED = re.compile(r"<solution>(.*?)</solution>", re.S)


def _examples(benchmark: str | None) -> list[str]:
    task = Instance(instance_id="t", question="Q?", root=REPO, benchmark=benchmark or "gaia")
    return [shown for shown in TAGGED.findall(instruction(task)) if shown]  # "inside <solution></solution>": none


@pytest.mark.parametrize("benchmark", sorted(b.name for b in registered()))
def test_no_default_prompt_shows_anything_a_model_can_copy_as_its_answer(benchmark):
    literal = {"multihoprag": ["Insufficient information."]}  # asked for word for word (Gaia2 ends by acting)
    assert _examples(benchmark) == literal.get(benchmark, [])  # before: ['42'], then ['[your final answer]']


def test_no_bundled_target_is_the_old_placeholder():
    targets = [i.answer for name in ("gaia-smoke", "math500-sample", "multihoprag-sample")
               for i in load_dataset(REPO / "datasets" / name).instances if i.answer]
    assert len(targets) > 40 and not [t for t in targets if copies_example(t)]


@pytest.mark.parametrize("answer", [EXAMPLE_ANSWER, "[Your Final Answer]", " your final  answer ",
                                    "'[your final answer]'"])
def test_a_copy_of_the_example_is_told(answer):
    assert copies_example(answer)


@pytest.mark.parametrize("answer", ["42", "your answer is 42", "final answer", "", None])
def test_answers_are_not_taken_for_the_example(answer):
    assert not copies_example(answer)


@pytest.mark.parametrize("answer,inside", [("[247]", True), (" [13, 14, 15] ", True), ("247", False),
                                           ("[]", False), ("[1] and [2", False), (None, False), ("a [b] c", False)])
def test_answers_in_brackets_are_told(answer, inside):
    assert bracketed(answer) is inside


@pytest.mark.docker
def test_an_answer_copying_the_example_is_counted_and_warned(tmp_path, image, reliability):
    out = out_dir(tmp_path)
    iids = [f"copy-{out.name}-{n}" for n in range(4)]
    data = tasks_file(tmp_path, iids)
    t0 = time.monotonic()
    try:
        copied = text(f"Done. <solution>{EXAMPLE_ANSWER}</solution>")
        inside = text("<solution>[42]</solution>")  # what the real 0.5B wrote: the placeholder's brackets kept
        with FakeOpenAI([copied, text("<solution>42</solution>"), copied, inside]) as server:
            config = fake_config(tmp_path / "models.toml", server.base_url)
            proc = harness("run", "--dataset", data, "--model", "fake", "--config", config, "--output-dir", out,
                           "--agent", "plain", "--workers", 1, timeout=240)
            prompts = [m["content"] for r in server.chat_requests for m in r["json"]["messages"] if m["role"] == "user"]
        got = json.loads((out / "report.json").read_text())
        flagged = got.get("copied_example", [])
        reliability.record("a model that copies the prompt's example answer (4 instances, 2 copy it, 1 its brackets)",
                           f"{len(flagged)} of 3 answers flagged as the example copied, "
                           f"warned: {'example' in proc.stdout}", lost=0, leaked=len(containers_of(out)), started=t0)
        assert proc.returncode == exit_codes.OK, explain(proc)
        assert len(prompts) == 4 and not [p for p in prompts if [t for t in TAGGED.findall(p) if t]], prompts
        assert [r["answer"] for r in rows(out)] == [EXAMPLE_ANSWER, "42", EXAMPLE_ANSWER, "[42]"]
        assert flagged == [iids[0], iids[2]], got
        assert got["bracketed"] == [iids[3]], got
        assert re.search(r"copied example answer\s*│\s*2 of 4", proc.stdout), proc.stdout
        assert re.search(r"answers in brackets\s*│\s*1 of 4", proc.stdout), proc.stdout
        assert [line for line in proc.stdout.splitlines() if line.startswith("warning: 1 answer(s) are wrapped in "
                                                                                 "square brackets")], proc.stdout
        warning = [line for line in proc.stdout.splitlines() if line.startswith("warning: 2 answer(s) are the "
                                                                                 "prompt's example")]
        assert len(warning) == 1 and iids[0] in warning[0] and iids[2] in warning[0], proc.stdout
    finally:
        assert remove_leftovers(out) == []
