"""The interface every tool-call format implements, and the JSON pieces they share.

A format turns `ToolCall`s into the exact text a model writes and back. ``body`` is
the part between ``open`` and ``close``: the part a grammar or a skeleton covers.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from toolweave.errors import CallFormatError
from toolweave.toolspec import ToolCall

__all__ = [
    "CallFormat",
    "call_from_json",
    "decode_json_at",
    "dump_json",
    "json_call_body",
    "read_json_calls",
    "skip_whitespace",
]

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\r\n"


class CallFormat(ABC):
    """How tool calls look in model output.

    ``open`` and ``close`` wrap each call (possibly empty); ``separator`` goes between
    consecutive calls of one response. The built-in formats set them on the class; a
    format read off a chat template (`toolweave.formats.syntax.SyntaxFormat`) on the
    instance.
    """

    name: str
    open: str
    close: str
    separator: str

    @abstractmethod
    def body(self, call: ToolCall) -> str:
        """Return ``call`` without open/close, arguments in the order given."""

    @abstractmethod
    def parse(self, text: str) -> list[ToolCall]:
        """Return every call in ``text``; raise `CallFormatError` on malformed text."""

    def serialize_call(self, call: ToolCall) -> str:
        """Return one call with its open and close text."""
        return f"{self.open}{self.body(call)}{self.close}"

    def serialize(self, calls: Sequence[ToolCall]) -> str:
        """Return ``calls`` joined by the separator."""
        return self.separator.join(self.serialize_call(call) for call in calls)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def dump_json(value: Any) -> str:
    """Compact JSON with unicode kept literal: the fewest tokens for the model to write."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def json_call_body(call: ToolCall, arguments_key: str) -> str:
    """Return ``{"name":...,"<arguments_key>":{...}}`` in compact JSON."""
    return dump_json({"name": call.name, arguments_key: dict(call.arguments)})


def call_from_json(value: Any, arguments_keys: Sequence[str]) -> ToolCall:
    """Turn a decoded JSON object into a `ToolCall`; the first present key holds arguments.

    Missing arguments mean a call without arguments.
    """
    if not isinstance(value, dict):
        raise CallFormatError(f"a tool call must be a JSON object, got {type(value).__name__}")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise CallFormatError(f"a tool call needs a non-empty string 'name', got {name!r}")
    key = next((k for k in arguments_keys if k in value), None)
    arguments = {} if key is None else value[key]
    if not isinstance(arguments, Mapping):
        raise CallFormatError(
            f"arguments of {name!r} must be a JSON object, got {type(arguments).__name__}"
        )
    return ToolCall(name, dict(arguments))


def decode_json_at(text: str, pos: int) -> tuple[Any, int]:
    """Decode one JSON value starting at ``pos``; return it and the index after it."""
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise CallFormatError(f"invalid JSON at position {exc.pos}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # an integer too long, arrays nested too deep
        raise CallFormatError(f"invalid JSON at position {pos}: {exc}") from None


def skip_whitespace(text: str, pos: int) -> int:
    """Return the index of the first non-whitespace character at or after ``pos``."""
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


def read_json_calls(
    text: str, arguments_keys: Sequence[str], separator: str = "", allow_lists: bool = False
) -> list[ToolCall]:
    """Parse text made only of JSON call objects, separated by whitespace and at most one
    ``separator`` between two calls (a trailing one is tolerated).

    With ``allow_lists`` a JSON list of call objects counts as that many calls.
    """
    calls: list[ToolCall] = []
    pos = skip_whitespace(text, 0)
    while pos < len(text):
        if text[pos] not in "{[":
            snippet = text[pos : pos + 20]
            raise CallFormatError(f"expected a JSON tool call at position {pos}: {snippet!r}")
        value, pos = decode_json_at(text, pos)
        if isinstance(value, list) and allow_lists:
            calls.extend(call_from_json(item, arguments_keys) for item in value)
        else:
            calls.append(call_from_json(value, arguments_keys))
        pos = skip_whitespace(text, pos)
        if separator and text.startswith(separator, pos):
            pos = skip_whitespace(text, pos + len(separator))
    return calls
