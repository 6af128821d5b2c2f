"""The chat model of a section, for runners without a framework: the one place that picks it.

A replay section plays its recorded turns (`ReplayChat`), `provider = "anthropic"` speaks the Messages
API (`AnthropicChat`), every other provider the OpenAI-compatible one (`OpenAIChat`).
"""

from __future__ import annotations

from harness.models.anthropic_messages import AnthropicChat
from harness.models.chat import ChatModel, OpenAIChat, ReplayChat
from harness.models.config import ModelSection
from harness.models.meter import Meter


def chat_model(section: ModelSection, meter: Meter, replay_turns: list[dict] | None) -> ChatModel:
    if section.kind == "replay":
        return ReplayChat(section, meter, replay_turns or [])
    if section.provider == "anthropic":
        return AnthropicChat(section, meter)
    return OpenAIChat(section, meter)
