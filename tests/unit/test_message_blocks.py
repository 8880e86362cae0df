"""A tool result's image, audio or file blocks reach a text-only model as one line each."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from toolweave.adapters.langchain.messages import message_text
from toolweave.errors import ToolweaveError

PNG = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}


def test_a_tool_image_is_described_once() -> None:
    message = ToolMessage(content=[{"type": "text", "text": "the chart:"}, PNG], tool_call_id="1")
    assert message_text(message) == "the chart:\n[image image/png, 8 bytes]"
    # An observation that already describes the block is not told twice.
    said = ToolMessage(
        content=[{"type": "text", "text": "[image image/png, 8 bytes]"}, PNG], tool_call_id="1"
    )
    assert message_text(said) == "[image image/png, 8 bytes]"


def test_a_user_image_is_refused_by_a_text_only_model() -> None:
    with pytest.raises(ToolweaveError, match="'image'"):
        message_text(HumanMessage(content=[{"type": "text", "text": "look"}, PNG]))
