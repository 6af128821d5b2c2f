"""`video_frames`: still frames of a workspace video, extracted by ffmpeg inside the sandbox.

One frame every `every_s` seconds (the first at 0 s), at most MAX_FRAMES of them and at most
MAX_WIDTH pixels wide, written as PNGs to /workspace/frames/<video>-every-<S>s/ (replaced on
each call); the tool returns their workspace paths with their times, for `view_image` (or any
tool that reads a workspace file). The path is confined to the workspace like a file read. Each
call is one `env` event (env "video", action "video_frames"): `error` when the path or the video
cannot be read, `timeout` when ffmpeg outlasts FRAMES_TIMEOUT_S.
"""

from __future__ import annotations

import time

from harness.environments.files import CONFINE
from harness.environments.scripts import outcome_of, script_reply
from harness.sandbox.contract import Sandbox
from harness.traces import EnvAction, Tracer

MAX_FRAMES = 30
MAX_WIDTH = 1280
MIN_EVERY_S = 0.1
FRAMES_TIMEOUT_S = 120.0

FRAMES = CONFINE + r"""
import re, shutil, subprocess
every, most, width = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if not os.path.isfile(real):
    out(error=f"no such file: {sys.argv[1]!r}")
probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", real],
                       capture_output=True, text=True)
try:
    duration = float(probe.stdout.strip())
except ValueError:
    duration = None
stem = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(real)).lstrip(".") or "video"
folder = os.path.join(root, "frames", f"{stem}-every-{every:g}s")
shutil.rmtree(folder, ignore_errors=True)
os.makedirs(folder)
run = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", real, "-an",
                      "-vf", f"fps={1 / every:.6f},scale='min({width},iw)':-2",
                      "-frames:v", str(most), os.path.join(folder, "frame-%04d.png")],
                     capture_output=True, text=True)
frames = sorted(os.path.join(folder, name) for name in os.listdir(folder))
if run.returncode != 0 or not frames:
    last = (run.stderr.strip().splitlines() or ["no frame came out"])[-1]
    out(error=f"cannot extract frames from {sys.argv[1]!r}: {last}"[:1000])
out(frames=frames, duration=duration)
"""


class VideoEnv:
    def __init__(self, sandbox: Sandbox, tracer: Tracer):
        self.sandbox, self.tracer = sandbox, tracer

    def frames(self, path: str, every_s: float) -> str:
        started = time.monotonic()
        args = {"path": path, "every_s": every_s}
        data: dict
        if not every_s >= MIN_EVERY_S:
            data = {"error": f"every_s must be at least {MIN_EVERY_S:g} seconds, not {every_s!r}"}
        else:
            argv = ["python3", "-c", FRAMES, path, str(float(every_s)), str(MAX_FRAMES), str(MAX_WIDTH)]
            result = self.sandbox.exec(argv, timeout=FRAMES_TIMEOUT_S)
            data = script_reply(result, f"extracting frames from {path!r}", FRAMES_TIMEOUT_S)
        outcome = outcome_of(data)
        self.tracer.emit(EnvAction(env="video", action="video_frames", args=args, outcome=outcome,
                                   seconds=round(time.monotonic() - started, 4), **data))
        if "error" in data:
            return f"Error: {data['error']}"
        frames, duration = data["frames"], data["duration"]
        lines = [f"t={i * every_s:g}s {frame}" for i, frame in enumerate(frames)]
        length = f"the video is {duration:g} s long" if duration is not None else "its length is unknown"
        cut = (f"; stopped at {MAX_FRAMES} frames (ask for a larger every_s to cover the rest)"
               if len(frames) == MAX_FRAMES and (duration is None or duration > MAX_FRAMES * every_s) else "")
        return (f"{len(frames)} frames of {path}, one every {every_s:g} s ({length}{cut}); "
                "look at them with view_image:\n" + "\n".join(lines))
