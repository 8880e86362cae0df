"""Llama 3.2 JSON tool calls: ``{"name":"f","parameters":{...}}``, joined by ``;``."""

from __future__ import annotations

from toolweave.formats.base import CallFormat, json_call_body, read_json_calls
from toolweave.toolspec import ToolCall

__all__ = ["Llama3Format"]

# Llama 3.1 prefixes calls with this token when it uses its built-in tool-call mode.
_PYTHON_TAG = "<|python_tag|>"


class Llama3Format(CallFormat):
    """Compact JSON objects with the arguments under ``parameters``.

    Parsing also accepts ``arguments`` (Llama models write both), ``"; "`` or newlines
    between calls, and a leading ``<|python_tag|>``.
    """

    name = "llama3"
    open = ""
    close = ""
    separator = ";"
    arguments_key = "parameters"

    def body(self, call: ToolCall) -> str:
        return json_call_body(call, self.arguments_key)

    def parse(self, text: str) -> list[ToolCall]:
        text = text.strip()
        if text.startswith(_PYTHON_TAG):
            text = text[len(_PYTHON_TAG) :]
        return read_json_calls(text, (self.arguments_key, "arguments"), separator=self.separator)
