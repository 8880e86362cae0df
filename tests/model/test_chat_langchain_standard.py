"""LangChain's standard chat-model test suites, run on the embedded SmolLM2-135M.

Both suites run in full against the real model. The only skips are the suites' own:
modalities a text-only model does not take (images, audio, PDF, Anthropic blocks),
per-call model overrides, serialisation and recorded (VCR) benchmarks.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_tests.integration_tests import ChatModelIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests

from toolweave.adapters.langchain.chat_model import ChatToolweave

# Short answers keep the suite fast; the user-turn policy makes tool-calling tests
# meaningful on a model that rarely opens a call on its own (see ChatToolweave).
PARAMS: dict[str, Any] = {"auto_calls": "user_turn"}

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
