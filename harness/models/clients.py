"""Build AutoGen model clients from a model section (the only place that knows providers)."""

from __future__ import annotations

from pathlib import Path

from harness.errors import InputError
from harness.models.config import ModelSection
from harness.models.metered import Meter, MeteredClient
from harness.models.replay import load_turns, to_create_results

TOOL_CAPABLE = {"vision": False, "function_calling": True, "json_output": True,
                "family": "unknown", "structured_output": False}


def build_client(section: ModelSection, meter: Meter, instance_id: str):
    if section.kind == "replay":
        from autogen_ext.models.replay import ReplayChatCompletionClient

        turns = load_turns(Path(section.path)).get(instance_id)
        if turns is None:
            raise InputError(f"replay file {section.path} has no turns for instance {instance_id!r}")
        inner = ReplayChatCompletionClient(to_create_results(turns), model_info=TOOL_CAPABLE)
    else:
        from autogen_ext.models.openai import OpenAIChatCompletionClient

        kwargs: dict = {"model": section.model, "api_key": section.api_key(),
                        "max_retries": section.max_retries, "timeout": section.timeout}
        if section.base_url:
            kwargs["base_url"] = section.base_url
        if section.temperature is not None:
            kwargs["temperature"] = section.temperature
        if section.max_tokens is not None:
            kwargs["max_tokens"] = section.max_tokens
        if section.model_info is not None:
            kwargs["model_info"] = {**TOOL_CAPABLE, **section.model_info}
        inner = OpenAIChatCompletionClient(**kwargs)
    return MeteredClient(inner, meter, label=section.name)
