"""Sight (issue 23 item 4): image attachments, view_image and browser screenshots shown to a vision model.

Real sandboxes (the image's Pillow resizes inside them), real Chromium for the screenshots, the real
agent process and both runners (plain: `image_url` parts; AutoGen: MultiModalMessage and Image) against
the fake OpenAI server, which records what each request really carried. A non-vision model gets text
and the preflight's warning.
"""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path

import pytest
from PIL import Image

from harness.agents.contract import Limits
from harness.agents.dry import dry_environments
from harness.datasets.model import Instance
from harness.environments.images import MAX_PIXELS, MAX_SIDE, ImageEnv, Picture, latest, png_size
from harness.environments.tools import sandbox_tools
from harness.exit_codes import INSTANCE_ERRORS
from harness.models.chat import _plain
from harness.models.config import ModelSection
from harness.runner.preflight import unseen_images
from harness.sandbox.contract import SandboxSpec
from harness.traces import Tracer
from tests.fakes.openai_server import FakeOpenAI, text, tool_calls
from tests.helpers.e2e import explain, fake_config, harness, rows, trace

SMOKE = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"
SITE = "http://shop.gaia.test"


def png(width: int, height: int, colour=(200, 30, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, "PNG")
    return buffer.getvalue()


def bounded(width: int, height: int) -> tuple[int, int]:
    """The size the sandbox's resizer gives an image of this size (images.RESIZE's rule)."""
    scale = min(1.0, MAX_SIDE / max(width, height), (MAX_PIXELS / (width * height)) ** 0.5)
    return int(width * scale), int(height * scale)


def section(vision: bool | None, kind: str = "openai") -> ModelSection:
    info = None if vision is None else {"vision": vision}
    return ModelSection(name="m", kind=kind, model="x", model_info=info)


def picture(number: int) -> Picture:
    return Picture(number, f"/workspace/{number}.png", b"", "image/png", 1, 1)


def image_parts(message: dict) -> list[dict]:
    content = message.get("content")
    return [p for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


def decoded(part: dict) -> Image.Image:
    url = part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,") or url.startswith("data:image/jpeg;base64,"), url[:40]
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


# -- pure logic ------------------------------------------------------------------------------------

def test_vision_is_the_sections_model_info_and_replay_sees_by_default():
    assert section(None).vision is False and section(False).vision is False and section(True).vision is True
    assert section(None, "replay").vision is True and section(False, "replay").vision is False


def test_view_image_is_offered_only_to_a_vision_model():
    def names(model):
        return [t.__name__ for t in sandbox_tools(dry_environments(Limits(), model))]
    assert "view_image" in names(section(True))
    assert "view_image" not in names(section(False)) and "view_image" not in names(None)


def test_a_request_shows_the_latest_pictures_where_they_first_appear():
    one, two, three = picture(1), picture(2), picture(3)
    assert latest([[one], [two, one], [three]], most=2) == [[], [two], [three]]
    assert latest([[one], [two]], most=0) == [[], []]


def test_the_trace_of_a_request_names_images_without_their_bytes():
    message = {"role": "user", "content": [{"type": "text", "text": "look"},
                                           {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}
    assert _plain(message)["content"] == "look\n[image]"


def test_png_size_reads_the_header():
    assert png_size(png(37, 11)) == (37, 11)
    with pytest.raises(ValueError):
        png_size(b"GIF89a....")


def test_the_preflight_warns_when_images_go_to_a_model_that_cannot_see(tmp_path):
    def inst(iid, files):
        return Instance(instance_id=iid, question="q", files=files, root=tmp_path)
    selected = [inst("a", ["chart.PNG"]), inst("b", ["notes.txt"]), inst("c", ["x/photo.webp"])]
    warning = unseen_images(section(False), selected)
    assert warning is not None and "2 selected instance(s)" in warning and "a, c" in warning
    assert "vision = true" in warning and "[llm.m.model_info]" in warning
    assert unseen_images(section(True), selected) is None
    assert unseen_images(section(False), [selected[1]]) is None


# -- a real sandbox ---------------------------------------------------------------------------------

@pytest.mark.docker
def test_images_are_bounded_and_reencoded_inside_the_sandbox(provider, image, run_id, tmp_path):
    (tmp_path / "big.png").write_bytes(png(3000, 2000))
    Image.new("RGB", (640, 480), (0, 90, 200)).save(tmp_path / "photo.jpg", "JPEG")
    Image.new("P", (120, 80)).save(tmp_path / "anim.gif", "GIF")
    (tmp_path / "fake.png").write_text("not an image at all")
    names = ["big.png", "photo.jpg", "anim.gif", "fake.png"]
    trace_path = tmp_path / "t.jsonl"
    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="sight")) as sb:
        sb.copy_in(tmp_path, names)
        images = ImageEnv(sb, Tracer(trace_path))
        shown, notes = images.task_pictures(names)
        outside = images.view("../etc/passwd")
        missing = images.view("nope.png")
    big, photo, gif = shown
    assert max(big.width, big.height) <= MAX_SIDE and big.width * big.height <= MAX_PIXELS
    assert big.original == (3000, 2000) and (big.width, big.height) == bounded(3000, 2000)
    assert Image.open(io.BytesIO(big.data)).size == (big.width, big.height)
    size = f"{big.width}x{big.height}"
    assert big.caption == f"[image #1: /workspace/big.png, {size}, resized from 3000x2000, shown below]"
    assert (photo.width, photo.height, photo.original) == (640, 480, None)
    assert (gif.width, gif.height) == (120, 80) and gif.mime in ("image/png", "image/jpeg")
    (note,) = notes
    assert note.startswith("/workspace/fake.png could not be shown: cannot open 'fake.png' as an image"), note
    assert outside.startswith("Error: ") and "outside /workspace" in outside
    assert missing == "Error: no such file: 'nope.png'"
    events = [json.loads(line) for line in trace_path.read_text().splitlines()]
    assert [(e["action"], e["outcome"]) for e in events] == [("task_image", "ok")] * 3 + [
        ("task_image", "error"), ("view_image", "error"), ("view_image", "error")]
    assert events[0]["file"] == "/workspace/big.png" and events[0]["width"] == big.width
    assert "base64" not in trace_path.read_text()


@pytest.mark.docker
def test_parallel_views_of_one_image_each_get_a_whole_picture_and_a_number_of_their_own(provider, image, run_id,
                                                                                           tmp_path):
    """view_image of one file 12 times at once (parallel tool calls run in threads), twice. Before, every
    call wrote the same /tmp file in the sandbox, so one read (or sized) a picture another was still
    writing: 13 of 48 pictures were truncated or unreadable. Noise keeps the PNG over MAX_BYTES, so each
    call writes a PNG and then a JPEG."""
    from concurrent.futures import ThreadPoolExecutor

    Image.frombytes("RGB", (2000, 1500), os.urandom(2000 * 1500 * 3)).save(tmp_path / "noise.png", "PNG")
    with provider.open(SandboxSpec(image=image, run_id=run_id, instance_id="sights")) as sb:
        sb.copy_in(tmp_path, ["noise.png"])
        rounds = []
        for _ in range(2):
            load = ImageEnv(sb, Tracer(tmp_path / "t.jsonl")).load
            with ThreadPoolExecutor(12) as pool:
                rounds.append(list(pool.map(load, ["noise.png"] * 12)))
    for pictures in rounds:
        assert sorted(p.number for p in pictures) == list(range(1, 13))
        for picture in pictures:
            made = Image.open(io.BytesIO(picture.data))
            made.load()  # a truncated file fails here
            assert made.size == (picture.width, picture.height) == bounded(2000, 1500)


# -- end to end, both runners ------------------------------------------------------------------------

def vision_config(path: Path, base_url: str, vision: bool = True) -> Path:
    config = fake_config(path, base_url)
    config.write_text(config.read_text().replace("vision = false", f"vision = {str(vision).lower()}"))
    return config


def chart_task(tmp_path: Path, iid: str) -> Path:
    (tmp_path / "chart.png").write_bytes(png(2400, 1200, (10, 160, 40)))
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps({"instance_id": iid, "question": "What colour is the chart in chart.png?",
                                "answer": "green", "files": ["chart.png"]}) + "\n")
    return data


SIGHT_SCRIPT = [tool_calls(("view_image", {"path": "chart.png"})),
                tool_calls(("visit_url", {"url": f"{SITE}/about"})),
                tool_calls(("screenshot", {})),
                text("It is <solution>green</solution>")]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("agent", ["plain", "assistant"])
def test_a_vision_model_is_shown_the_attachment_view_image_and_a_screenshot(agent, tmp_path, image, out):
    """The task message carries the PNG attachment (resized in the sandbox), view_image's picture and a
    real Chromium screenshot follow their tool results as image parts; traces keep references only."""
    data = chart_task(tmp_path, f"sight-{agent}")
    with FakeOpenAI(SIGHT_SCRIPT) as server:
        proc = harness("run", "--dataset", data, "--model", "fake", "--config",
                       vision_config(tmp_path / "m.toml", server.base_url), "--output-dir", out,
                       "--agent", agent, "--website", SMOKE / "website", "--workers", 1,
                       "--instance-timeout", 240)
    assert proc.returncode == 0, explain(proc)
    assert "cannot see" not in proc.stdout + proc.stderr
    (row,) = rows(out)
    assert row["status"] == "ok" and row["correct"] is True, row
    assert row["tool_calls"] == ["view_image", "visit_url", "screenshot"]
    requests = [r["json"]["messages"] for r in server.chat_requests]
    assert len(requests) == 4
    assert "view_image" in {t["function"]["name"] for t in server.chat_requests[0]["json"]["tools"]}

    task = next(m for m in requests[0] if m["role"] == "user")
    (attached,) = image_parts(task)
    assert decoded(attached).size == bounded(2400, 1200)  # bounded inside the sandbox
    assert decoded(attached).getpixel((5, 5))[:3] == (10, 160, 40)
    assert "What colour is the chart" in json.dumps(task) and "/workspace/chart.png" in json.dumps(task)

    def shown_after_tool(messages: list[dict]) -> list[dict]:
        """The image parts of user messages that follow a tool result."""
        return [p for before, m in zip(messages, messages[1:], strict=False)
                if before["role"] == "tool" and m["role"] == "user" for p in image_parts(m)]

    viewed = shown_after_tool(requests[1])
    assert len(viewed) == 1 and decoded(viewed[0]).size == bounded(2400, 1200)
    shot = shown_after_tool(requests[3])
    assert len(shot) == 2  # view_image's picture still shown, then the screenshot
    screenshot = decoded(shot[1])
    assert screenshot.format == "PNG" and screenshot.size[0] >= 200 and screenshot.size[1] >= 200
    tool_texts = [m["content"] for m in requests[3] if m["role"] == "tool"]
    assert any(isinstance(t, str) and t.startswith("[image #3: ") and "-shots/shot-" in t for t in tool_texts)

    events = trace(out, row)
    raw = (out / row["trace"]).read_text()
    assert "base64" not in raw and len(raw) < 200_000
    pictures = [e for e in events if e["type"] == "env" and e["env"] == "image"]
    assert [e["action"] for e in pictures] == ["task_image", "view_image", "screenshot"]
    kept = out / Path(row["trace"]).parent / pictures[2]["file"]
    assert kept.is_file() and png_size(kept.read_bytes()) == screenshot.size


@pytest.mark.docker
@pytest.mark.slow
def test_a_model_without_vision_gets_text_and_the_preflight_warns(tmp_path, image, out):
    data = chart_task(tmp_path, "sight-blind")
    script = [tool_calls(("read_file", {"path": "chart.png"})), text("I cannot tell <solution>green</solution>")]
    with FakeOpenAI(script) as server:
        proc = harness("run", "--dataset", data, "--model", "fake", "--config",
                       vision_config(tmp_path / "m.toml", server.base_url, vision=False), "--output-dir", out,
                       "--agent", "plain", "--workers", 1, "--instance-timeout", 120)
    assert proc.returncode == 0, explain(proc)
    said = proc.stdout + proc.stderr
    assert "1 selected instance(s) carry images" in said and "cannot see" in said and "sight-blind" in said
    requests = [r["json"] for r in server.chat_requests]
    assert not any(image_parts(m) for r in requests for m in r["messages"])
    assert all(isinstance(m["content"], str) or m["content"] is None for r in requests for m in r["messages"])
    assert "view_image" not in {t["function"]["name"] for t in requests[0]["tools"]}
    tool_result = requests[1]["messages"][-1]
    assert tool_result["role"] == "tool" and not tool_result["content"].startswith("[image #")


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("agent", ["plain", "assistant"])
def test_a_replay_turn_that_needs_an_image_answers_only_a_request_with_one(agent, tmp_path, image):
    """A replay model sees by default: the task's image part reaches its turn, which answers; the same
    recording replayed with vision off gets no image part and ends as the model's error."""
    data = chart_task(tmp_path, f"replay-sight-{agent}")
    recording = tmp_path / "replay.jsonl"
    recording.write_text(json.dumps({"instance_id": f"replay-sight-{agent}", "turns": [
        {"content": "Green. <solution>green</solution>", "needs_image": True}]}) + "\n")
    config = tmp_path / "m.toml"
    config.write_text(f'[llm.seeing]\nkind = "replay"\npath = "{recording}"\n\n'
                      f'[llm.blind]\nkind = "replay"\npath = "{recording}"\n[llm.blind.model_info]\nvision = false\n')
    outcomes = {}
    for model in ("seeing", "blind"):
        out = tmp_path / model
        proc = harness("run", "--dataset", data, "--model", model, "--config", config, "--output-dir", out,
                       "--agent", agent, "--workers", 1, "--instance-timeout", 120)
        assert proc.returncode == (0 if model == "seeing" else INSTANCE_ERRORS), explain(proc)
        (row,) = rows(out)
        outcomes[model] = (row["status"], row["error_kind"], row["correct"], row.get("error") or "")
    assert outcomes["seeing"][:3] == ("ok", None, True), outcomes
    status, kind, _, message = outcomes["blind"]
    assert (status, kind) == ("error", "model") and "answers a request with an image" in message, outcomes
