"""AutoGen's Anthropic client over the installed anthropic SDK.

autogen-ext 0.7.5's `AnthropicChatCompletionClient` always sends `temperature` to
`messages.create`, which the anthropic SDK 2.x no longer takes as an argument (the API still
does). `anthropic_chat_client` builds AutoGen's own `BaseAnthropicChatCompletionClient` (its
message and tool conversion, usage, stop reasons) over the SDK's client behind `_BodySampling`,
which sends such parameters in the request body instead (models/providers.py, `in_body`).
It takes AnthropicChatCompletionClient's configuration keys.
"""

from __future__ import annotations

import inspect
from typing import Any

from autogen_ext.models.anthropic import BaseAnthropicChatCompletionClient

from harness.models.providers import in_body


def anthropic_chat_client(**config: Any) -> BaseAnthropicChatCompletionClient:
    import anthropic

    client_keys = set(inspect.signature(anthropic.AsyncAnthropic.__init__).parameters) - {"self"}
    model_info = config.pop("model_info", None)
    client = anthropic.AsyncAnthropic(**{key: config.pop(key) for key in list(config) if key in client_keys})
    return BaseAnthropicChatCompletionClient(client=_BodySampling(client), create_args=config, model_info=model_info)


class _BodySampling:
    """The SDK client as AutoGen's Anthropic client uses it (`messages.create`, `close`)."""

    def __init__(self, client: Any):
        self._client = client
        self.messages = self

    def create(self, **kwargs: Any) -> Any:
        return self._client.messages.create(**in_body(kwargs))

    async def close(self) -> None:
        await self._client.close()
