"""Tool-call text formats: one module per format, one shared interface (`CallFormat`).

The built-in formats are named (`get_format`); any other model's syntax is read off its
chat template (`detect_call_format`, `toolweave.formats.detect`) as a `CallSyntax`.

get_format("hermes").serialize([ToolCall("get_weather", {"city": "Zürich"})])
-> '<tool_call>{"name":"get_weather","arguments":{"city":"Zürich"}}</tool_call>'
"""

from __future__ import annotations

from toolweave.errors import CallFormatError
from toolweave.formats.base import CallFormat
from toolweave.formats.detect import detect_call_format, detect_call_syntax, syntax_family
from toolweave.formats.free_text import calls_in_text
from toolweave.formats.hermes import HermesFormat
from toolweave.formats.llama3 import Llama3Format
from toolweave.formats.plain_json import JsonFormat
from toolweave.formats.pycall import PyCallFormat, from_literal, to_literal
from toolweave.formats.stream import CallDelta, CallStream
from toolweave.formats.syntax import CallSyntax, SyntaxFormat

__all__ = [
    "FORMATS",
    "CallDelta",
    "CallFormat",
    "CallStream",
    "CallSyntax",
    "HermesFormat",
    "JsonFormat",
    "Llama3Format",
    "PyCallFormat",
    "SyntaxFormat",
    "calls_in_text",
    "detect_call_format",
    "detect_call_syntax",
    "format_for_chat_template",
    "from_literal",
    "get_format",
    "syntax_family",
    "to_literal",
]

_REGISTRY: dict[str, CallFormat] = {
    fmt.name: fmt for fmt in (HermesFormat(), JsonFormat(), Llama3Format(), PyCallFormat())
}

FORMATS: tuple[str, ...] = tuple(_REGISTRY)
"""Names of the known formats."""

_LLAMA3_MARKERS = ("<|python_tag|>", "<|eom_id|>", "ipython")


def get_format(name: str) -> CallFormat:
    """Return the format called ``name``; `CallFormatError` lists the known names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(FORMATS)
        raise CallFormatError(f"unknown call format {name!r} (known: {known})") from None


def format_for_chat_template(template: str | None) -> CallFormat:
    """Pick the format a model's chat template expects.

    Templates that mention ``<tool_call>`` get hermes; Llama 3 templates get llama3;
    other ChatML templates (SmolLM2 and the like) get hermes; anything else gets json.
    """
    if template is None:
        return _REGISTRY["json"]
    if "<tool_call>" in template:
        return _REGISTRY["hermes"]
    if any(marker in template for marker in _LLAMA3_MARKERS):
        return _REGISTRY["llama3"]
    if "<|im_start|>" in template:
        return _REGISTRY["hermes"]
    return _REGISTRY["json"]
