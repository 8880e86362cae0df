"""Reading a response in a `CallSyntax` back into calls, leniently: whitespace around the
markers, prose before the first call and a response cut after its last call are
accepted; xml values are typed by the tools' schemas."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolweave.errors import CallFormatError
from toolweave.formats.base import decode_json_at
from toolweave.formats.markers import Marker, anchor, closing_paren, skip_ws
from toolweave.formats.pycall import PyCallFormat
from toolweave.toolspec import ToolCall, ToolSpec

if TYPE_CHECKING:
    from toolweave.formats.syntax import CallSyntax

__all__ = ["SyntaxReader", "xml_value"]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_PYNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
#: Longest argument name read in the xml layout.
_MAX_KEY = 200
#: Deepest nesting of a value written in a template's own notation.
_MAX_DEPTH = 32


def xml_value(raw: str, schema: Mapping[str, Any] | None = None) -> Any:
    """An xml-layout argument value: raw text for strings, JSON (or a Python literal
    ``True``/``False``/``None``) for the rest. Without a schema, text that reads as a
    JSON number, boolean, null, array or object is taken as that value."""
    kind = (schema or {}).get("type")
    if kind == "string" or (isinstance(kind, list) and kind == ["string"]):
        return raw
    text = raw.strip()
    python = {"True": True, "False": False, "None": None}
    if text in python:
        return python[text]
    if text and (text[0] in '-0123456789[{"' or text in ("true", "false", "null")):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return raw


class SyntaxReader:
    """Reads the calls of a response written in `syntax`; `tools` type the xml layout's
    values by their argument schemas (a string stays text)."""

    def __init__(self, syntax: CallSyntax, tools: Mapping[str, ToolSpec]) -> None:
        self.syntax = syntax
        self.tools = tools
        s = syntax
        self.start = Marker(anchor(s.open + s.call_open))
        self.next = Marker(s.call_close + s.separator + s.call_open)
        self.end = Marker(s.call_close + s.close)
        self.call_close = Marker(s.call_close)
        self.name_close = Marker(s.name_close)
        self.key_open = Marker(s.key_open)
        self.key_close = Marker(s.key_close)
        self.value_close = Marker(s.value_close)
        self.string_open = Marker(s.string_open)
        self.string_close = Marker(s.string_close)
        self.other_open = Marker(s.other_open)
        self.arg_separator = Marker(s.arg_separator)

    def parse(self, text: str) -> list[ToolCall]:
        calls: list[ToolCall] = []
        pos = 0
        while True:
            if self.start.blank:
                if calls:
                    return calls
                pos = skip_ws(text, 0)
                if pos == len(text):
                    return calls
            else:
                span = self.start.search(text, pos)
                if span is None:
                    return calls
                pos = span[1]
            pos = self._read_block(text, pos, calls)

    def _read_block(self, text: str, pos: int, calls: list[ToolCall]) -> int:
        while True:
            call, pos = self.read_call(text, pos)
            calls.append(call)
            after = self.next.match(text, pos) if not self.next.blank else None
            if after is not None:
                pos = after
                continue
            end = self.end.match(text, pos)
            if self.next.blank and self._starts_call(text, pos):
                pos = skip_ws(text, pos)
                continue
            if end is not None and not self.end.blank:
                return end
            rest = text[pos:].strip()
            if not rest or self.end.text.strip().startswith(rest):
                return len(text)  # cut after the last call
            if self.end.blank and (not self.start.blank or rest.startswith("<")):
                return pos  # prose, or the end-of-turn tag, after a marker-less close
            snippet = rest[:20]
            raise CallFormatError(
                f"expected {self.end.text.strip() or 'end of calls'!r} at position {pos}: "
                f"{snippet!r}"
            )

    def _starts_call(self, text: str, pos: int) -> bool:
        pos = skip_ws(text, pos)
        if pos >= len(text):
            return False
        if self.syntax.layout == "json":
            return text[pos] == "{"
        return bool(_NAME.match(text, pos))

    def read_call(self, text: str, pos: int) -> tuple[ToolCall, int]:
        layout = self.syntax.layout
        if layout == "json":
            return self._read_json(text, pos)
        if layout == "python":
            return _read_python(text, pos)
        name, pos = self._read_name(text, pos)
        if layout == "named-json":
            pos = skip_ws(text, pos)
            if not text.startswith("{", pos):
                raise CallFormatError(f"expected the JSON arguments of {name!r} at {pos}")
            args, pos = decode_json_at(text, pos)
            return ToolCall(name, _object(args, name)), pos
        return self._read_xml_arguments(text, pos, name)

    def _read_name(self, text: str, pos: int) -> tuple[str, int]:
        pos = skip_ws(text, pos)
        found = _NAME.match(text, pos)
        if found is None:
            raise CallFormatError(
                f"expected a tool name at position {pos}: {text[pos : pos + 20]!r}"
            )
        name, pos = found.group(), found.end()
        after = self.name_close.match(text, pos)
        if after is None:
            if self.name_close.blank or pos == len(text):
                return name, pos
            snippet = text[pos : pos + 20]
            raise CallFormatError(
                f"expected {self.syntax.name_close.strip()!r} after {name!r}: {snippet!r}"
            )
        return name, after

    def _read_json(self, text: str, pos: int) -> tuple[ToolCall, int]:
        s = self.syntax
        pos = skip_ws(text, pos)
        if not text.startswith("{", pos):
            raise CallFormatError(f"expected a JSON tool call at position {pos}")
        value, pos = decode_json_at(text, pos)
        if not isinstance(value, dict):  # pragma: no cover - starts with "{"
            raise CallFormatError("a tool call must be a JSON object")
        if s.name_key is None:
            if len(value) != 1:
                raise CallFormatError(f"expected one key, the tool name, got {list(value)[:4]}")
            name, args = next(iter(value.items()))
        else:
            name = value.get(s.name_key)
            args = value.get(s.arguments_key, {})
        if not isinstance(name, str) or not name:
            raise CallFormatError(f"a tool call needs a non-empty string {s.name_key!r}")
        if isinstance(args, str):
            args, _ = decode_json_at(args, skip_ws(args, 0)) if args.strip() else ({}, 0)
        return ToolCall(name, _object(args, name)), pos

    def _read_xml_arguments(self, text: str, pos: int, name: str) -> tuple[ToolCall, int]:
        s = self.syntax
        args: dict[str, Any] = {}
        while True:
            at = pos
            if args and not self.arg_separator.blank:
                sep = self.arg_separator.match(text, pos)
                if sep is None:
                    return ToolCall(name, args), pos
                at = sep
            after = self.key_open.match(text, at)
            if after is None:
                return ToolCall(name, args), pos
            end = self.key_close.search(text, after, min(len(text), after + _MAX_KEY))
            key = text[after : end[0]].strip() if end is not None else ""
            if self.key_open.blank and not _NAME.fullmatch(key):
                return ToolCall(name, args), pos  # no marker opens a key: this is not one
            if end is None:
                raise CallFormatError(f"argument name of {name!r} not closed at {after}")
            if not key:
                raise CallFormatError(f"empty argument name in a call to {name!r}")
            if key in args:
                raise CallFormatError(f"argument {key!r} repeated in call to {name}")
            if s.typed:
                args[key], pos = self._read_typed_value(text, end[1], name, key)
                continue
            start = end[1]
            lead = s.key_close[len(s.key_close.rstrip()) :]
            if lead and text.startswith(lead, start):
                start += len(lead)
            stop = self.value_close.search(text, start)
            if stop is None:  # cut inside the value: not a call (its value is not known)
                raise CallFormatError(f"argument {key!r} of {name!r} is not closed")
            raw, pos = text[start : stop[0]], stop[1]
            trail = s.value_close[: len(s.value_close) - len(s.value_close.lstrip())]
            if trail and raw.endswith(trail):
                raw = raw[: -len(trail)]
            args[key] = xml_value(raw, self._schema(name, key))

    def _read_typed_value(self, text: str, pos: int, name: str, key: str) -> tuple[Any, int]:
        """A value of a typed xml syntax: marked raw text for a string, else JSON."""
        other = self.other_open.match(text, pos) if not self.other_open.blank else None
        if self.string_open.blank:
            string = pos if other is None and not self.other_open.blank else None
        else:
            string = self.string_open.match(text, pos)
        if string is not None:
            close = self.string_close if not self.string_close.blank else self.value_close
            stop = close.search(text, string)
            if stop is None:  # cut inside the value: not a call (its value is not known)
                raise CallFormatError(f"argument {key!r} of {name!r} is not closed")
            value, pos = text[string : stop[0]], stop[1]
            if not self.string_close.blank:
                pos = self.value_close.match(text, pos) or pos
            return value, pos
        start = skip_ws(text, other if other is not None else pos)
        value, pos = self._marked_value(text, start, 0)
        if not self.value_close.blank:
            after = self.value_close.match(text, pos)
            if after is None and pos < len(text):
                snippet = text[pos : pos + 20]
                raise CallFormatError(
                    f"expected the end of argument {key!r} of {name!r} at {pos}: {snippet!r}"
                )
            pos = after or pos
        return value, pos

    def _marked_value(self, text: str, pos: int, depth: int) -> tuple[Any, int]:
        """A JSON value, or one written the way some templates write nested values:
        keys unquoted and strings between the string markers (Gemma 4's
        ``{a:1,b:<|"|>x<|"|>}``)."""
        if depth > _MAX_DEPTH:
            raise CallFormatError(f"value nested deeper than {_MAX_DEPTH} at {pos}")
        pos = skip_ws(text, pos)
        quote = self.string_open
        if not quote.blank and (found := quote.match(text, pos)) is not None:
            close = self.string_close if not self.string_close.blank else quote
            stop = close.search(text, found)
            if stop is None:
                raise CallFormatError(f"string at position {pos} is not closed")
            return text[found : stop[0]], stop[1]
        if pos < len(text) and text[pos] in "{[":
            try:
                return decode_json_at(text, pos)
            except CallFormatError:
                return self._marked_container(text, pos, depth)
        return decode_json_at(text, pos)

    def _marked_container(self, text: str, pos: int, depth: int) -> tuple[Any, int]:
        closing = "}" if text[pos] == "{" else "]"
        items: list[Any] = []
        obj: dict[str, Any] = {}
        pos += 1
        while True:
            pos = skip_ws(text, pos)
            if text.startswith(closing, pos):
                return (obj if closing == "}" else items), pos + 1
            if (obj or items) and text.startswith(",", pos):
                pos = skip_ws(text, pos + 1)
            if closing == "}":
                key, pos = self._marked_key(text, pos)
                obj[key], pos = self._marked_value(text, pos, depth + 1)
            else:
                item, pos = self._marked_value(text, pos, depth + 1)
                items.append(item)
            if pos >= len(text):
                raise CallFormatError(f"{closing!r} missing at the end of the text")

    def _marked_key(self, text: str, pos: int) -> tuple[str, int]:
        """An object key: a bare name, a JSON string or a marked string; then ``:``."""
        key: Any
        if text[pos : pos + 1] in ('"', "<"):
            key, end = self._marked_value(text, pos, _MAX_DEPTH)
        else:
            found = _NAME.match(text, pos)
            if found is None:
                snippet = text[pos : pos + 20]
                raise CallFormatError(f"expected a key at position {pos}: {snippet!r}")
            key, end = found.group(), found.end()
        end = skip_ws(text, end)
        if not isinstance(key, str) or not text.startswith(":", end):
            raise CallFormatError(f"expected ':' after a key at position {end}")
        return key, end + 1

    def _schema(self, name: str, key: str) -> Mapping[str, Any] | None:
        spec = self.tools.get(name)
        if spec is None or key not in spec.parameters.get("properties", {}):
            return None
        return spec.property_schema(key)


def _object(args: Any, name: str) -> dict[str, Any]:
    if not isinstance(args, Mapping):
        raise CallFormatError(
            f"arguments of {name!r} must be a JSON object, got {type(args).__name__}"
        )
    return dict(args)


def _read_python(text: str, pos: int) -> tuple[ToolCall, int]:
    pos = skip_ws(text, pos)
    found = _PYNAME.match(text, pos)
    if found is None or not text.startswith("(", found.end()):
        raise CallFormatError(f"expected a Python call at position {pos}: {text[pos : pos + 20]!r}")
    end = closing_paren(text, found.end())
    calls = PyCallFormat().parse(text[pos:end])
    if len(calls) != 1:  # pragma: no cover - one balanced call
        raise CallFormatError(f"expected one call at position {pos}")
    return calls[0], end
