"""LangChain's standard chat-model test suites, run on the embedded SmolLM2-135M.

Both suites run in full against the real model. The only skips are the suites' own:
modalities a text-only model does not take (images, audio, PDF, Anthropic blocks),
per-call model overrides, serialisation and recorded (VCR) benchmarks. The unit suite's
standard arguments leave out those of hosted APIs (``api_key``, ``timeout``,
``max_retries``), which ChatToolweave rejects like any argument it does not take.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_tests.integration_tests import ChatModelIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests

from toolweave.adapters.langchain.chat_model import ChatToolweave

# Short answers keep the suite fast; the user-turn policy makes tool-calling tests
# meaningful on a model that rarely opens a call on its own (see ChatToolweave).
PARAMS: dict[str, Any] = {"auto_calls": "user_turn"}
#: Arguments of hosted-model clients, meaningless for a model in this process.
REMOTE_ONLY = ("api_key", "timeout", "max_retries")
#: Usage details reported on invoke and on streams: prompt tokens read from the cache.
USAGE_DETAILS: dict[Any, Any] = {"invoke": ["cache_read_input"], "stream": ["cache_read_input"]}


def invoke_twice(model: BaseChatModel, *, stream: bool) -> AIMessage:
    """The second of two identical requests, whose prompt comes from the cache."""
    prompt: list[BaseMessage] = [HumanMessage("Name one colour.")]
    model.invoke(prompt)
    if not stream:
        return model.invoke(prompt)  # type: ignore[return-value]
    chunks = list(model.stream(prompt))
    full = chunks[0]
    for c in chunks[1:]:
        full = full + c
    return AIMessage(
        content=full.content,
        usage_metadata=full.usage_metadata,
        response_metadata=full.response_metadata,
    )


# The suites' async tests carry no marker; they expect pytest-asyncio in auto mode.
# Run them on asyncio, as LangChain does.
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning"),
]


class TestChatToolweaveUnit(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ChatToolweave

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return dict(PARAMS)

    @property
    def standard_chat_model_params(self) -> dict[str, Any]:
        params = super().standard_chat_model_params
        return {k: v for k, v in params.items() if k not in REMOTE_ONLY}

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def supports_json_mode(self) -> bool:
        return True


class TestChatToolweaveIntegration(ChatModelIntegrationTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ChatToolweave

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {**PARAMS, "max_tokens": 320}

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def supported_usage_metadata_details(self) -> dict[Any, Any]:
        return USAGE_DETAILS

    def invoke_with_cache_read_input(self, *, stream: bool = False) -> AIMessage:
        return invoke_twice(ChatToolweave(**{**PARAMS, "max_tokens": 8}), stream=stream)
