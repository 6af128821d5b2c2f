"""view_image, for a model that sees images (the model section's `vision`; harness/environments/images.py).
Its environment is also how every runner shows a vision model the task's pictures and the ones its tools
name (screenshots, an MCP tool's image parts)."""

from __future__ import annotations

from harness.datasets.model import Instance
from harness.environments import Environments, ImageEnv
from harness.environments.family import Needs, Setup, Tool, ToolFamily


class Images(ToolFamily[ImageEnv]):
    name, order = "images", 30
    needs = Needs(pip=("pillow",))

    def offered(self, setup: Setup) -> bool:
        return setup.model is not None and setup.model.vision

    def build(self, setup: Setup, envs: Environments) -> ImageEnv:
        return ImageEnv(setup.sandbox, setup.tracer, setup.shots)

    def tools(self, envs: Environments, instance: Instance | None) -> list[Tool]:
        images = envs.of(Images)
        if images is None:
            return []

        async def view_image(path: str) -> str:
            """Look at an image file of the workspace (png, jpg, gif, webp; a video frame, a chart, a scan):
            the picture is shown to you after this result, resized to at most 1568 pixels a side."""
            return await envs.call(images.view, path)

        return [view_image]
