"""Pictures for vision models: image attachments, workspace images, browser screenshots and MCP tools' images.

Only a model whose section says `model_info.vision = true` gets an `ImageEnv` (harness/models/config.py,
`ModelSection.vision`); without one, images stay what they were: markitdown's metadata text.

- Bounds. A picture is at most MAX_SIDE pixels on its longer side and MAX_PIXELS in all; a task
  offers at most MAX_TASK_IMAGES of its attachments (png, jpg, jpeg, gif, webp; a GIF's first
  frame), and a request carries at most MAX_SHOWN_IMAGES tool pictures, the latest (older ones stay
  in the conversation as their caption).
- Inside the sandbox. A workspace image is opened, resized and re-encoded by Pillow in the sandbox's
  toolbox (RESIZE), as PNG (JPEG for a JPEG, or when the PNG would exceed MAX_BYTES); the result is read out
  through `Sandbox.read_file`. The host never parses the original file: it gets a PNG or JPEG the
  sandbox made, within the bounds. A screenshot is Chromium's own PNG of its viewport. A picture
  handed over as bytes (an MCP tool result's image part: environments/mcp_tools.py) is sent into
  the sandbox on stdin (at most MAX_GIVEN_BYTES) and bounded there the same way (GIVEN).
- In the conversation. A tool that shows a picture returns its caption, `[image #N: WHERE, WxH,
  shown below]`; the picture is kept here under N. Each runner puts the pictures its tool results
  name into the request as an image part of a user message following those results (OpenAI tool
  messages take text only): the plain runner as `image_url` parts (`openai_parts`), AutoGen as an
  `Image` (harness/agents/autogen/models.py). The task's attachments go into the task message.
- In the trace. WHERE is the picture's file: its /workspace path, or the screenshot's (or given
  picture's) file in the instance's trace folder. Every picture is an `env` event (env "image") with that reference and
  its sizes; requests are traced with `[image]` for each image part, never its bytes.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.environments.files import CONFINE
from harness.sandbox.contract import WORKSPACE, Sandbox
from harness.traces import EnvAction, Tracer

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
MAX_SIDE = 1568  # pixels on the longer side
MAX_PIXELS = 1_200_000  # pixels in all (about 1.2 megapixels: what hosted vision models take unscaled)
MAX_BYTES = 1 << 20  # a PNG larger than this is sent as JPEG instead
MAX_TASK_IMAGES = 8  # attachments shown in the task message; the rest are named for view_image
MAX_SHOWN_IMAGES = 8  # tool pictures in one request, the latest
MAX_GIVEN_BYTES = 16 << 20  # of a picture handed over as bytes (an MCP tool's image part), before bounding
CAPTION = re.compile(r"\[image #(\d+): ")

BOUND = r"""
import hashlib
max_side, max_pixels, max_bytes = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
try:
    from PIL import Image
except ImportError:
    out(error="pillow is not installed in this sandbox image (rebuild it: harness images build)")
try:
    with Image.open(real) as im:
        kind = im.format
        if kind not in ("PNG", "JPEG", "GIF", "WEBP"):
            out(error=f"{sys.argv[1]!r} is not a PNG, JPEG, GIF or WebP image (it is {kind})")
        width, height = im.size
        scale = min(1.0, max_side / max(width, height), (max_pixels / (width * height)) ** 0.5)
        size = (max(1, int(width * scale)), max(1, int(height * scale)))
        alpha = im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info
        frame = im.convert("RGBA" if alpha else "RGB")
        if size != (width, height):
            frame = frame.resize(size, Image.LANCZOS, reducing_gap=3.0)
except Exception as exc:
    out(error=f"cannot open {sys.argv[1]!r} as an image: {type(exc).__name__}: {exc}"[:2000])
dest = "/tmp/harness-image-" + hashlib.sha256(real.encode()).hexdigest()[:16]
def saved(suffix, fmt, **options):
    # made under a name of its own, then moved into place whole: a parallel view of the same file
    # never reads (or sizes) a picture another one is still writing
    mine = f"{dest}.{os.getpid()}{suffix}"
    frame.save(mine, fmt, **options)
    return mine
if kind != "JPEG":  # a photograph stays a JPEG; anything else is tried as PNG first
    mine = saved(".png", "PNG", compress_level=3)
    if os.path.getsize(mine) <= max_bytes:
        os.replace(mine, dest + ".png")
        out(path=real, file=dest + ".png", mime="image/png", width=size[0], height=size[1], original=[width, height])
    os.unlink(mine)
if alpha:
    background = Image.new("RGB", frame.size, "white")
    background.paste(frame, mask=frame.getchannel("A"))
    frame = background
os.replace(saved(".jpg", "JPEG", quality=85), dest + ".jpg")
out(path=real, file=dest + ".jpg", mime="image/jpeg", width=size[0], height=size[1], original=[width, height])
"""
RESIZE = CONFINE + r"""
if not os.path.isfile(real):
    out(error=f"no such file: {sys.argv[1]!r}")
""" + BOUND
# A picture handed over as bytes (on stdin; argv[1] names it in messages), bounded the same way.
GIVEN = r"""
import hashlib, json, os, sys
def out(**kw):
    print(json.dumps(kw)); sys.exit(0)
data = sys.stdin.buffer.read()
real = "/tmp/harness-given-" + hashlib.sha256(data).hexdigest()[:16]
with open(f"{real}.{os.getpid()}", "wb") as fh:  # then moved into place whole, as BOUND's pictures are
    fh.write(data)
os.replace(f"{real}.{os.getpid()}", real)
""" + BOUND


def is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


def image_files(names: Iterable[str]) -> list[str]:
    """The names among `names` that are images a vision model is shown (by suffix)."""
    return [name for name in names if is_image(name)]


@dataclass(frozen=True)
class Picture:
    number: int
    where: str  # the picture's file: a /workspace path or the screenshot's file in the trace folder
    data: bytes
    mime: str
    width: int
    height: int
    original: tuple[int, int] | None = None  # before resizing, when it was resized

    @property
    def caption(self) -> str:
        resized = f", resized from {self.original[0]}x{self.original[1]}" if self.original else ""
        return f"[image #{self.number}: {self.where}, {self.width}x{self.height}{resized}, shown below]"

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode()}"


def png_size(data: bytes) -> tuple[int, int]:
    """A PNG's width and height, from its header (no decoder)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 24:
        raise ValueError("not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


class ImageEnv:
    """One instance's pictures: loaded from the sandbox or given (screenshots, MCP tools' image parts),
    numbered, kept for the runners. `folder`: where given pictures are kept on the host, beside the
    instance's trace (None: not kept; the trace then names them by their label)."""

    def __init__(self, sandbox: Sandbox, tracer: Tracer, folder: Path | None = None):
        self.sandbox, self.tracer, self.folder = sandbox, tracer, folder
        self.pictures: dict[int, Picture] = {}
        self._numbering = threading.Lock()  # parallel tool calls run in threads (Environments.call)

    def _trace(self, action: str, args: dict, started: float, **result) -> None:
        outcome = "error" if "error" in result else "ok"
        self.tracer.emit(EnvAction(env="image", action=action, args=args, outcome=outcome,
                                   seconds=round(time.monotonic() - started, 4), **result))

    def _keep(self, where: str, data: bytes, mime: str, width: int, height: int,
              original: tuple[int, int] | None = None) -> Picture:
        with self._numbering:
            picture = Picture(len(self.pictures) + 1, where, data, mime, width, height, original)
            self.pictures[picture.number] = picture
        return picture

    def load(self, path: str, action: str = "view_image") -> Picture:
        """A workspace image, bounded and re-encoded inside the sandbox; ValueError naming the problem."""
        rel = path[len(WORKSPACE) + 1:] if path.startswith(WORKSPACE + "/") else path
        return self._bounded(RESIZE, rel, {"path": path}, action)

    def given(self, data: bytes, label: str, action: str) -> Picture:
        """A picture handed over as bytes (an MCP tool's image part, `label` naming it): bounded and
        re-encoded inside the sandbox like a workspace image (the host never parses it) and kept in
        `folder`; ValueError naming the problem."""
        if len(data) > MAX_GIVEN_BYTES:
            error = f"{label} is {len(data)} bytes, more than the {MAX_GIVEN_BYTES} an image may have"
            self._trace(action, {"label": label}, time.monotonic(), error=error)
            raise ValueError(error)
        return self._bounded(GIVEN, label, {"label": label}, action, stdin=data)

    def _bounded(self, script: str, name: str, args: dict, action: str, stdin: bytes | None = None) -> Picture:
        """`script` (RESIZE or GIVEN) run in the sandbox on `name`; the picture it made, kept and traced."""
        started = time.monotonic()
        result = self.sandbox.exec(["python3", "-c", script, name, str(MAX_SIDE), str(MAX_PIXELS), str(MAX_BYTES)],
                                   timeout=60, stdin=stdin)
        try:
            data = json.loads(result.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            why = result.stderr.strip()[-1000:] or f"the resizer exited {result.exit_code} without a message"
            data = {"error": f"cannot read {name!r} as an image: {why}"}
        if "error" in data:
            self._trace(action, args, started, error=data["error"])
            raise ValueError(data["error"])
        original = tuple(data["original"])
        image = self.sandbox.read_file(data["file"], max_bytes=4 * MAX_BYTES)
        where = data["path"] if stdin is None else self._kept(image, data["mime"], name)
        picture = self._keep(where, image, data["mime"], data["width"], data["height"],
                             None if original == (data["width"], data["height"]) else (original[0], original[1]))
        self._trace(action, args, started, image=picture.number, file=picture.where,
                    width=picture.width, height=picture.height, bytes=len(picture.data))
        return picture

    def _kept(self, image: bytes, mime: str, label: str) -> str:
        """A given picture written into `folder`; its name as traces give it (the label when not kept)."""
        if self.folder is None:
            return label
        path = self.folder / f"given-{len(self.pictures) + 1}-{int(time.time() * 1000)}.{mime.split('/')[-1]}"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image)
        except OSError as exc:  # the run directory refusing it costs the trace its copy, not the model its picture
            return f"{label} (not kept: {exc.strerror or exc})"
        return f"{self.folder.name}/{path.name}"

    def view(self, path: str) -> str:
        """The view_image tool: the picture's caption (the runner shows the picture), or the error."""
        try:
            return self.load(path).caption
        except ValueError as exc:
            return f"Error: {exc}"

    def screenshot(self, png: bytes, where: str) -> Picture:
        """A browser screenshot (Chromium's PNG of its viewport), kept at `where` (the trace folder's file)."""
        started = time.monotonic()
        width, height = png_size(png)
        picture = self._keep(where, png, "image/png", width, height)
        self._trace("screenshot", {}, started, image=picture.number, file=where, width=width, height=height,
                    bytes=len(png))
        return picture

    def task_pictures(self, files: Iterable[str]) -> tuple[list[Picture], list[str]]:
        """The task's image attachments as pictures (at most MAX_TASK_IMAGES), and the sentences
        naming those not shown (beyond the bound, or unreadable as images)."""
        shown: list[Picture] = []
        notes: list[str] = []
        for name in image_files(files):
            if len(shown) >= MAX_TASK_IMAGES:
                notes.append(f"{WORKSPACE}/{name} is not shown (at most {MAX_TASK_IMAGES} images are); "
                             "use view_image to see it.")
                continue
            try:
                shown.append(self.load(name, action="task_image"))
            except ValueError as exc:
                notes.append(f"{WORKSPACE}/{name} could not be shown: {exc}")
        return shown, notes

    def named(self, texts: Iterable[str]) -> list[Picture]:
        """The pictures whose captions appear in `texts` (tool results), each once, in order."""
        seen: dict[int, Picture] = {}
        for text in texts:
            for match in CAPTION.finditer(text or ""):
                picture = self.pictures.get(int(match[1]))
                if picture is not None:
                    seen.setdefault(picture.number, picture)
        return list(seen.values())


def latest(groups: list[list[Picture]], most: int = MAX_SHOWN_IMAGES) -> list[list[Picture]]:
    """Per group (one per tool-results message, in conversation order), the pictures a request shows:
    the last `most` pictures of the conversation, each where it first appears; the rest are left out."""
    first: dict[int, tuple[int, Picture]] = {}
    for index, group in enumerate(groups):
        for picture in group:
            first.setdefault(picture.number, (index, picture))
    keep = set(sorted(first)[-most:]) if most > 0 else set()
    shown: list[list[Picture]] = [[] for _ in groups]
    for number, (index, picture) in first.items():
        if number in keep:
            shown[index].append(picture)
    return shown


def openai_parts(text: str, pictures: list[Picture]) -> list[dict]:
    """An OpenAI user message's content: the text, then each picture's caption and its image_url part."""
    parts: list[dict] = [{"type": "text", "text": text}]
    for picture in pictures:
        parts += [{"type": "text", "text": picture.caption},
                  {"type": "image_url", "image_url": {"url": picture.data_url()}}]
    return parts


def task_text(task: str, notes: list[str]) -> str:
    """The task message's text with the sentences about attachments not shown."""
    return "\n\n".join([task, *notes]) if notes else task


SHOWN_BELOW = "The images named in the tool results above:"
