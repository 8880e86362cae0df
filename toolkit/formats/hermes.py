"""Hermes / Qwen style: ``<tool_call>{"name":"f","arguments":{...}}</tool_call>``."""

from __future__ import annotations

from toolweave.errors import CallFormatError
from toolweave.formats.base import (
    CallFormat,
    call_from_json,
    decode_json_at,
    json_call_body,
    skip_whitespace,
)
from toolweave.toolspec import ToolCall

__all__ = ["HermesFormat"]


class HermesFormat(CallFormat):
    """Each call is a compact JSON object inside ``<tool_call>`` tags, one per line.

    Text around the tags is ignored, and the last close tag may be missing (models
    often stop right after the JSON).
    """

    name = "hermes"
    open = "<tool_call>"
    close = "</tool_call>"
    separator = "\n"
    arguments_key = "arguments"

    def body(self, call: ToolCall) -> str:
        return json_call_body(call, self.arguments_key)

    def parse(self, text: str) -> list[ToolCall]:
        calls: list[ToolCall] = []
        start = text.find(self.open)
        while start != -1:
            # Decode the JSON first, so a close tag inside a string value is not the end.
            pos = skip_whitespace(text, start + len(self.open))
            value, pos = decode_json_at(text, pos)
            calls.append(call_from_json(value, (self.arguments_key,)))
            pos = skip_whitespace(text, pos)
            if text.startswith(self.close, pos):
                pos += len(self.close)
            elif pos < len(text):
                snippet = text[pos : pos + 20]
                raise CallFormatError(f"expected {self.close!r} at position {pos}: {snippet!r}")
            start = text.find(self.open, pos)
        return calls
