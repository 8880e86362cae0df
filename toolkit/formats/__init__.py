"""Tool-call text formats: one module per format, one shared interface (`CallFormat`).

get_format("hermes").serialize([ToolCall("get_weather", {"city": "Zürich"})])
-> '<tool_call>{"name":"get_weather","arguments":{"city":"Zürich"}}</tool_call>'
"""

from __future__ import annotations

from toolweave.errors import CallFormatError
from toolweave.formats.base import CallFormat
from toolweave.formats.hermes import HermesFormat
from toolweave.formats.llama3 import Llama3Format
from toolweave.formats.plain_json import JsonFormat
from toolweave.formats.pycall import PyCallFormat, from_literal, to_literal

__all__ = [
    "FORMATS",
    "CallFormat",
    "HermesFormat",
    "JsonFormat",
    "Llama3Format",
    "PyCallFormat",
    "format_for_chat_template",
    "from_literal",
    "get_format",
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
