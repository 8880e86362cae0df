"""Bare JSON calls: ``{"name":"f","arguments":{...}}``, one per line."""

from __future__ import annotations

from toolweave.formats.base import CallFormat, json_call_body, read_json_calls
from toolweave.toolspec import ToolCall

__all__ = ["JsonFormat"]


class JsonFormat(CallFormat):
    """Each call is a compact JSON object; a JSON list of call objects is also read."""

    name = "json"
    open = ""
    close = ""
    separator = "\n"
    arguments_key = "arguments"

    def body(self, call: ToolCall) -> str:
        return json_call_body(call, self.arguments_key)

    def parse(self, text: str) -> list[ToolCall]:
        return read_json_calls(text, (self.arguments_key,), allow_lists=True)
