"""video_frames: still frames of a workspace video, by ffmpeg in the sandbox (harness/environments/video.py);
offered wherever there is a file environment."""

from __future__ import annotations

from harness.datasets.model import Instance
from harness.environments import Environments
from harness.environments.family import Needs, Tool, ToolFamily
from harness.environments.video import VideoEnv


class Video(ToolFamily[None]):
    name, order = "video", 50
    needs = Needs(apt=("ffmpeg",), pip=("pillow",))

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        if envs.file is None:
            return []
        video = VideoEnv(envs.file.sandbox, envs.file.tracer)

        async def video_frames(path: str, every_s: float = 5.0) -> str:
            """Extract still frames from a workspace video, one every every_s seconds (at most 30); returns
            the frames' workspace paths and times, to look at with view_image."""
            return await envs.call(video.frames, path, every_s)

        return [video_frames]
