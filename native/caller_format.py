"""The call format a `ToolCaller` decodes, and how it is shown to the grammar and decoder.

It holds the format a chat template's model writes (`template_format`), whether the
template itself describes the tools (`uses_template_tools`), whether a format writes a
call's arguments as one JSON object (`json_arguments`), the special tokens the call
grammar must ask for (`special_tokens`), and the view of a format the response decoder
is given (`decoder_format`).
"""

from __future__ import annotations

import json

from toolweave.formats import (
    CallFormat,
    SyntaxFormat,
    detect_call_format,
    format_for_chat_template,
)
from toolweave.formats.syntax import CALL_ID, INDEX
from toolweave.grammar.call import syntax_grammar_gap
from toolweave.grammar.syntax_call import RAW_LAYOUTS, call_parts
from toolweave.native.constraints import Vocabulary
from toolweave.native.decode.layout import ARGUMENTS_SENTINEL
from toolweave.native.engine import Engine
from toolweave.prompting.chat_template import template_renders_tools
from toolweave.toolspec import ToolCall

__all__ = [
    "decoder_format",
    "json_arguments",
    "special_tokens",
    "template_format",
    "uses_template_tools",
]


def template_format(template: str | None) -> CallFormat:
    """The call format a chat template's model writes: its own syntax read off the
    template (`detect_call_format`) where that is not a built-in format and the call
    grammar covers it (layouts json, named-json, xml and python without slots), else the
    format picked by name (`format_for_chat_template`)."""
    picked = format_for_chat_template(template)
    if template is None:
        return picked
    try:
        detected = detect_call_format(template)
    except Exception:  # no syntax read off the template: the picked format, as always
        return picked
    if isinstance(detected, SyntaxFormat) and syntax_grammar_gap(detected.syntax) is None:
        return detected
    return picked


def uses_template_tools(template: str | None, fmt: CallFormat) -> bool:
    """Whether a caller decoding `fmt` describes its tools through `template`'s ``tools``
    variable: the template lists them, and writes calls in `fmt`'s syntax (so the prompt
    the model reads shows the calls the grammar lets it write)."""
    if template is None or not template_renders_tools(template):
        return False
    try:
        own = detect_call_format(template)
    except Exception:  # the template writes no calls toolweave can read
        return False
    probe = ToolCall("probe_tool", {"probe_argument": "value"})
    try:
        return own.serialize_call(probe) == fmt.serialize_call(probe)
    except Exception:  # a format that cannot write the probe call writes another syntax
        return False


class _DecoderFormat(SyntaxFormat):
    """A syntax whose arguments are not one JSON object (xml, python), as the response
    decoder reads formats: it finds a call's head (the text before its first argument)
    and tail by writing a call whose one argument is a sentinel and looking for that
    argument as JSON (``"<sentinel>":0``). This view writes that call as head + the JSON
    sentinel + tail, and everything else as the format itself does."""

    def __init__(self, fmt: SyntaxFormat) -> None:
        super().__init__(fmt.syntax, fmt.name, tuple(fmt.tools.values()))

    def serialize_call(self, call: ToolCall) -> str:
        if list(call.arguments) != [ARGUMENTS_SENTINEL]:
            return super().serialize_call(call)
        head, tail = call_parts(self, call.name)
        marker = json.dumps(ARGUMENTS_SENTINEL) + ":0"
        return self.syntax.open + head + marker + tail + self.syntax.close


def json_arguments(fmt: CallFormat) -> bool:
    """Whether `fmt` writes a call's arguments as one JSON object: what `fast` value
    drafts and their write-back are built for."""
    syntax = fmt.syntax if isinstance(fmt, SyntaxFormat) else None
    return syntax is None or syntax.layout not in RAW_LAYOUTS


def decoder_format(fmt: CallFormat) -> CallFormat:
    """What the response decoder is given for `fmt`: the format itself, or for a syntax
    writing each argument apart (xml, python) the view that shows the decoder where a
    call's arguments start and end (`_DecoderFormat`)."""
    if isinstance(fmt, SyntaxFormat) and not json_arguments(fmt):
        return _DecoderFormat(fmt)
    return fmt


def special_tokens(engine: Engine, vocab: Vocabulary, fmt: SyntaxFormat) -> dict[str, int]:
    """The special tokens (text -> id) the engine's tokenizer writes, from plain text,
    inside `fmt`'s markers: llguidance matches such a token only as itself, never as
    its text, so the call grammar must ask for the token there (Gemma 4's
    ``<|tool_call>`` and ``<|"|>`` on its vocabulary)."""
    s = fmt.syntax
    markers = [s.open, s.close, s.call_open, s.call_close, s.separator, s.name_close]
    markers += [s.key_open, s.key_close, s.value_close, s.string_open, s.string_close]
    markers += [s.other_open, s.arg_separator]
    found: dict[str, int] = {}
    for marker in markers:
        text = marker.replace(INDEX, "0").replace(CALL_ID, "id")
        if not text.strip():
            continue
        for token in engine.tokenize(text, parse_special=False):
            if vocab.tokenizer.is_special_token(token):
                found[engine.token_bytes(token).decode("utf-8", errors="replace")] = token
    return found
