"""A tool-call syntax as data (`CallSyntax`), and the format that writes and reads it.

Every syntax found in current chat templates is one of four argument layouts inside
fixed markers:

- ``json``: a JSON object holding the name and the arguments (``{"name": "f",
  "arguments": {...}}``, or ``{"f": {...}}`` when ``name_key`` is None), and in some
  templates the call's id as its first or last key (``{"tool_call_id": "0", ...}``,
  ``{..., "id": "call00000"}``);
- ``named-json``: the name as text, then the arguments as a JSON object
  (``[TOOL_CALLS]f[ARGS]{...}``);
- ``xml``: the name as text, then one marked-up element per argument
  (``<function=f><parameter=city>Paris</parameter></function>``), strings raw and other
  values as JSON;
- ``python``: a Python keyword call ``f(city="Paris")``.

A response is ``open``, then calls joined by ``separator``, then ``close``; each call is
``call_open`` + the call + ``call_close``. Markers may hold `INDEX` (the call's position,
from 0) or `CALL_ID` (the call's id). Parsing is lenient about whitespace around the
markers, reads text before the first call as prose, and accepts a response cut after its
last call (a missing ``call_close`` or ``close``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolweave.errors import CallFormatError
from toolweave.formats.base import CallFormat, decode_json_at, dump_json
from toolweave.formats.pycall import PyCallFormat
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = [
    "CALL_ID",
    "INDEX",
    "LAYOUTS",
    "CallSyntax",
    "Layout",
    "SyntaxFormat",
    "default_call_id",
    "marker_pattern",
    "slots",
    "syntax_of",
    "xml_value",
]

Layout = Literal["json", "named-json", "xml", "python"]
LAYOUTS: tuple[Layout, ...] = ("json", "named-json", "xml", "python")

#: Stands for the call's position (0, 1, ...) inside a marker.
INDEX = "\x1e"
#: Stands for the call's id inside a marker.
CALL_ID = "\x1f"

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_PYNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
#: The one argument of the call written to find a call's head (`SyntaxFormat.head_at`).
_HEAD_SENTINEL = "__toolweave_head__"
#: Longest argument name read in the xml layout.
_MAX_KEY = 200
#: Deepest nesting of a value written in a template's own notation.
_MAX_DEPTH = 32


@dataclass(frozen=True)
class CallSyntax:
    """How one model writes tool calls (see the module docstring for the layouts).

    ``name_close`` ends the name (named-json, xml); ``key_open``, ``key_close`` and
    ``value_close`` surround an argument's name and end its value, ``arg_separator``
    goes between arguments (xml). A typed xml syntax (`typed`) marks the kind of each
    value: ``string_open`` + raw text + ``string_close`` for a string, ``other_open`` +
    JSON for the rest (Gemma 4's ``key:<|"|>text<|"|>``, DeepSeek V3.2's
    ``string="true">``).
    ``arguments_as_string`` says the json layout writes the arguments as a JSON string;
    ``string_arguments_in`` that the template must be given them as one (in
    ``tool_calls``).
    ``multiple`` is False when the template writes one call per message at most.
    ``id_key`` names the key of the json layout's object that holds the call's id,
    written ``id_value`` (which may hold `INDEX` or `CALL_ID`), first in the object when
    ``id_first``, else last.
    """

    layout: Layout
    open: str = ""
    close: str = ""
    call_open: str = ""
    call_close: str = ""
    separator: str = ""
    name_key: str | None = "name"
    arguments_key: str = "arguments"
    name_close: str = ""
    key_open: str = ""
    key_close: str = ""
    value_close: str = ""
    string_open: str = ""
    string_close: str = ""
    other_open: str = ""
    arg_separator: str = ""
    arguments_as_string: bool = False
    string_arguments_in: bool = False
    multiple: bool = True
    id_key: str | None = None
    id_value: str = CALL_ID
    id_first: bool = False

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise CallFormatError(f"unknown call layout {self.layout!r} (known: {LAYOUTS})")
        if self.id_key is not None and (self.layout != "json" or self.name_key is None):
            raise CallFormatError("only a json call object with a name key holds a call id")
        if self.id_key is not None and self.id_key in (self.name_key, self.arguments_key):
            raise CallFormatError(f"the call id key {self.id_key!r} is also another key")
        if self.layout == "xml":
            if not (self.key_open.strip() or self.arg_separator.strip()):
                raise CallFormatError("an xml call syntax needs a key_open or an arg_separator")
            if not (self.value_close.strip() or (self.typed and self.string_close.strip())):
                raise CallFormatError("an xml call syntax needs a value_close or a string_close")

    @property
    def positional(self) -> bool:
        """Whether a call is written differently at each position of a response: its
        id key, or a marker of the call, holds the call's index or id."""
        held = [self.call_open, self.call_close, self.name_close]
        if self.id_key is not None:
            held.append(self.id_value)
        return any(INDEX in text or CALL_ID in text for text in held)

    @property
    def typed(self) -> bool:
        """Whether string values are marked apart from the others (xml)."""
        return bool(self.string_open or self.string_close or self.other_open)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (slots written ``{index}`` and ``{id}``)."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            if isinstance(value, str):
                value = value.replace(INDEX, "{index}").replace(CALL_ID, "{id}")
            out[key] = value
        return out


def marker_pattern(marker: str) -> str:
    """Regex text matching ``marker`` with any whitespace where it has whitespace
    (none required), digits for `INDEX` and an id for `CALL_ID`."""
    out: list[str] = []
    for piece in re.split(r"(\s+|\x1e|\x1f)", marker.strip()):
        if not piece:
            continue
        if piece == INDEX:
            out.append(r"\d+")
        elif piece == CALL_ID:
            out.append(r"[A-Za-z0-9_.:\-]*")
        elif piece.isspace():
            out.append(r"\s*")
        else:
            out.append(re.escape(piece))
    return "".join(out)


class _Marker:
    """A compiled marker: matched after optional whitespace."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.blank = not text.strip()
        self._re = re.compile(r"\s*" + marker_pattern(text))
        self._search = re.compile(marker_pattern(text)) if not self.blank else None

    def match(self, text: str, pos: int) -> int | None:
        """Index after the marker at ``pos`` (whitespace before it skipped), or None."""
        found = self._re.match(text, pos)
        return None if found is None else found.end()

    def search(self, text: str, pos: int, end: int | None = None) -> tuple[int, int] | None:
        """(start, end) of the next occurrence at or after ``pos``."""
        if self._search is None:
            return None
        found = self._search.search(text, pos, len(text) if end is None else end)
        return None if found is None else found.span()


def _anchor(opening: str) -> str:
    """The last tag of a multi-tag opening: what a model writes even after its own
    reasoning (``<|START_THINKING|><|END_THINKING|><|START_ACTION|>`` -> the last one)."""
    text = opening.strip()
    cuts = [m.start() for m in re.finditer(r"(?<=[>\]])<", text)]
    return text[cuts[-1] :] if cuts else text


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


class SyntaxFormat(CallFormat):
    """The `CallFormat` of a `CallSyntax`: writes calls exactly in its markers (JSON
    compact) and reads them back leniently."""

    def __init__(
        self, syntax: CallSyntax, name: str | None = None, tools: Sequence[ToolSpec] = ()
    ) -> None:
        self.syntax = syntax
        #: Tools whose schemas type the xml layout's values (a string stays text).
        self.tools: dict[str, ToolSpec] = {t.name: t for t in tools}
        self.name = name or syntax.layout
        # open/close of the CallFormat interface: what wraps one call of a one-call reply.
        self.open = syntax.open + syntax.call_open
        self.close = syntax.call_close + syntax.close
        self.separator = syntax.call_close + syntax.separator + syntax.call_open
        s = syntax
        self._start = _Marker(_anchor(s.open + s.call_open))
        self._next = _Marker(s.call_close + s.separator + s.call_open)
        self._end = _Marker(s.call_close + s.close)
        self._call_close = _Marker(s.call_close)
        self._name_close = _Marker(s.name_close)
        self._key_open = _Marker(s.key_open)
        self._key_close = _Marker(s.key_close)
        self._value_close = _Marker(s.value_close)
        self._string_open = _Marker(s.string_open)
        self._string_close = _Marker(s.string_close)
        self._other_open = _Marker(s.other_open)
        self._arg_separator = _Marker(s.arg_separator)

    def with_tools(self, tools: Sequence[ToolSpec]) -> SyntaxFormat:
        """The same format reading xml-layout values by the tools' argument schemas."""
        return SyntaxFormat(self.syntax, self.name, tools)

    # ------------------------------------------------------------------ writing
    def serialize(self, calls: Any) -> str:
        calls = list(calls)
        s = self.syntax
        if len(calls) > 1 and not s.multiple:
            raise CallFormatError(f"the {self.name} syntax writes one call per message")
        parts = [self._marked_call(c, i) for i, c in enumerate(calls)]
        return slots(s.open, 0) + s.separator.join(parts) + slots(s.close, 0)

    def serialize_call(self, call: ToolCall) -> str:
        return self.serialize([call])

    def body(self, call: ToolCall, index: int = 0) -> str:
        """The call itself, markers aside, as written at position ``index`` of a response."""
        return self._body(call, index)

    def serialize_call_at(self, call: ToolCall, index: int) -> str:
        """A response holding `call` as it is written at position ``index`` (its id; the
        response's own markers as for one call)."""
        s = self.syntax
        return slots(s.open, 0) + self._marked_call(call, index) + slots(s.close, 0)

    def head_at(self, name: str, index: int) -> str:
        """The text of a one-call response up to the first argument key of a call of
        `name` written at position ``index``."""
        marker = dump_json({_HEAD_SENTINEL: 0})[1:-1]
        text = self.serialize_call_at(ToolCall(name, {_HEAD_SENTINEL: 0}), index)
        return text[: text.index(marker)]

    def _marked_call(self, call: ToolCall, index: int) -> str:
        s = self.syntax
        return slots(s.call_open, index) + self._body(call, index) + slots(s.call_close, index)

    def _body(self, call: ToolCall, index: int) -> str:
        s = self.syntax
        args = dict(call.arguments)
        if s.layout == "python":
            return PyCallFormat().body(call)
        if s.layout == "json":
            value: Any = dump_json(args) if s.arguments_as_string else args
            if s.name_key is None:
                return dump_json({call.name: value})
            obj: dict[str, Any] = {}
            if s.id_key is not None and s.id_first:
                obj[s.id_key] = slots(s.id_value, index)
            obj[s.name_key] = call.name
            obj[s.arguments_key] = value
            if s.id_key is not None and not s.id_first:
                obj[s.id_key] = slots(s.id_value, index)
            return dump_json(obj)
        if s.layout == "named-json":
            return f"{call.name}{slots(s.name_close, index)}{dump_json(args)}"
        items = s.arg_separator.join(
            f"{s.key_open}{key}{s.key_close}{self._xml_value_text(value)}{s.value_close}"
            for key, value in args.items()
        )
        return f"{call.name}{s.name_close}{items}"

    def _xml_value_text(self, value: Any) -> str:
        s = self.syntax
        if not s.typed:
            return _xml_text(value)
        if isinstance(value, str):
            return f"{s.string_open}{value}{s.string_close}"
        return f"{s.other_open}{dump_json(value)}"

    # ------------------------------------------------------------------ reading
    def parse(self, text: str) -> list[ToolCall]:
        calls: list[ToolCall] = []
        pos = 0
        while True:
            if self._start.blank:
                if calls:
                    return calls
                pos = _skip_ws(text, 0)
                if pos == len(text):
                    return calls
            else:
                span = self._start.search(text, pos)
                if span is None:
                    return calls
                pos = span[1]
            pos = self._read_block(text, pos, calls)

    def _read_block(self, text: str, pos: int, calls: list[ToolCall]) -> int:
        while True:
            call, pos = self._read_call(text, pos)
            calls.append(call)
            after = self._next.match(text, pos) if not self._next.blank else None
            if after is not None:
                pos = after
                continue
            end = self._end.match(text, pos)
            if self._next.blank and self._starts_call(text, pos):
                pos = _skip_ws(text, pos)
                continue
            if end is not None and not self._end.blank:
                return end
            rest = text[pos:].strip()
            if not rest or self._end.text.strip().startswith(rest):
                return len(text)  # cut after the last call
            if self._end.blank and (not self._start.blank or rest.startswith("<")):
                return pos  # prose, or the end-of-turn tag, after a marker-less close
            snippet = rest[:20]
            raise CallFormatError(
                f"expected {self._end.text.strip() or 'end of calls'!r} at position {pos}: "
                f"{snippet!r}"
            )

    def _starts_call(self, text: str, pos: int) -> bool:
        pos = _skip_ws(text, pos)
        if pos >= len(text):
            return False
        if self.syntax.layout == "json":
            return text[pos] == "{"
        return bool(_NAME.match(text, pos))

    def _read_call(self, text: str, pos: int) -> tuple[ToolCall, int]:
        layout = self.syntax.layout
        if layout == "json":
            return self._read_json(text, pos)
        if layout == "python":
            return _read_python(text, pos)
        name, pos = self._read_name(text, pos)
        if layout == "named-json":
            pos = _skip_ws(text, pos)
            if not text.startswith("{", pos):
                raise CallFormatError(f"expected the JSON arguments of {name!r} at {pos}")
            args, pos = decode_json_at(text, pos)
            return ToolCall(name, _object(args, name)), pos
        return self._read_xml_arguments(text, pos, name)

    def _read_name(self, text: str, pos: int) -> tuple[str, int]:
        pos = _skip_ws(text, pos)
        found = _NAME.match(text, pos)
        if found is None:
            raise CallFormatError(
                f"expected a tool name at position {pos}: {text[pos : pos + 20]!r}"
            )
        name, pos = found.group(), found.end()
        after = self._name_close.match(text, pos)
        if after is None:
            if self._name_close.blank or pos == len(text):
                return name, pos
            snippet = text[pos : pos + 20]
            raise CallFormatError(
                f"expected {self.syntax.name_close.strip()!r} after {name!r}: {snippet!r}"
            )
        return name, after

    def _read_json(self, text: str, pos: int) -> tuple[ToolCall, int]:
        s = self.syntax
        pos = _skip_ws(text, pos)
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
            args, _ = decode_json_at(args, _skip_ws(args, 0)) if args.strip() else ({}, 0)
        return ToolCall(name, _object(args, name)), pos

    def _read_xml_arguments(self, text: str, pos: int, name: str) -> tuple[ToolCall, int]:
        s = self.syntax
        args: dict[str, Any] = {}
        while True:
            at = pos
            if args and not self._arg_separator.blank:
                sep = self._arg_separator.match(text, pos)
                if sep is None:
                    return ToolCall(name, args), pos
                at = sep
            after = self._key_open.match(text, at)
            if after is None:
                return ToolCall(name, args), pos
            end = self._key_close.search(text, after, min(len(text), after + _MAX_KEY))
            key = text[after : end[0]].strip() if end is not None else ""
            if self._key_open.blank and not _NAME.fullmatch(key):
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
            stop = self._value_close.search(text, start)
            if stop is None:  # cut inside the value: not a call (its value is not known)
                raise CallFormatError(f"argument {key!r} of {name!r} is not closed")
            raw, pos = text[start : stop[0]], stop[1]
            trail = s.value_close[: len(s.value_close) - len(s.value_close.lstrip())]
            if trail and raw.endswith(trail):
                raw = raw[: -len(trail)]
            args[key] = xml_value(raw, self._schema(name, key))

    def _read_typed_value(self, text: str, pos: int, name: str, key: str) -> tuple[Any, int]:
        """A value of a typed xml syntax: marked raw text for a string, else JSON."""
        other = self._other_open.match(text, pos) if not self._other_open.blank else None
        if self._string_open.blank:
            string = pos if other is None and not self._other_open.blank else None
        else:
            string = self._string_open.match(text, pos)
        if string is not None:
            close = self._string_close if not self._string_close.blank else self._value_close
            stop = close.search(text, string)
            if stop is None:  # cut inside the value: not a call (its value is not known)
                raise CallFormatError(f"argument {key!r} of {name!r} is not closed")
            value, pos = text[string : stop[0]], stop[1]
            if not self._string_close.blank:
                pos = self._value_close.match(text, pos) or pos
            return value, pos
        start = _skip_ws(text, other if other is not None else pos)
        value, pos = self._marked_value(text, start, 0)
        if not self._value_close.blank:
            after = self._value_close.match(text, pos)
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
        pos = _skip_ws(text, pos)
        quote = self._string_open
        if not quote.blank and (found := quote.match(text, pos)) is not None:
            close = self._string_close if not self._string_close.blank else quote
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
            pos = _skip_ws(text, pos)
            if text.startswith(closing, pos):
                return (obj if closing == "}" else items), pos + 1
            if (obj or items) and text.startswith(",", pos):
                pos = _skip_ws(text, pos + 1)
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
        end = _skip_ws(text, end)
        if not isinstance(key, str) or not text.startswith(":", end):
            raise CallFormatError(f"expected ':' after a key at position {end}")
        return key, end + 1

    def _schema(self, name: str, key: str) -> Mapping[str, Any] | None:
        spec = self.tools.get(name)
        if spec is None or key not in spec.parameters.get("properties", {}):
            return None
        return spec.property_schema(key)


def slots(marker: str, index: int) -> str:
    """`marker` as written for the call at ``index``: its `INDEX` and `CALL_ID` filled."""
    return marker.replace(INDEX, str(index)).replace(CALL_ID, default_call_id(index))


def default_call_id(index: int) -> str:
    """The id of the call at ``index`` of a message when it has none of its own: nine
    letters and digits (what Mistral's templates insist on)."""
    return f"call{index:05d}"


def _xml_text(value: Any) -> str:
    return value if isinstance(value, str) else dump_json(value)


def _object(args: Any, name: str) -> dict[str, Any]:
    if not isinstance(args, Mapping):
        raise CallFormatError(
            f"arguments of {name!r} must be a JSON object, got {type(args).__name__}"
        )
    return dict(args)


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _read_python(text: str, pos: int) -> tuple[ToolCall, int]:
    pos = _skip_ws(text, pos)
    found = _PYNAME.match(text, pos)
    if found is None or not text.startswith("(", found.end()):
        raise CallFormatError(f"expected a Python call at position {pos}: {text[pos : pos + 20]!r}")
    end = _closing_paren(text, found.end())
    calls = PyCallFormat().parse(text[pos:end])
    if len(calls) != 1:  # pragma: no cover - one balanced call
        raise CallFormatError(f"expected one call at position {pos}")
    return calls[0], end


def _closing_paren(text: str, pos: int) -> int:
    """Index after the parenthesis closing the one at ``pos`` (strings skipped)."""
    depth = 0
    i = pos
    quote = ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif text.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif ch in "\"'":
            quote = ch * 3 if text.startswith(ch * 3, i) else ch
            i += len(quote) - 1
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise CallFormatError(f"call at position {pos} is not closed")


def syntax_of(fmt: CallFormat) -> CallSyntax | None:
    """The `CallSyntax` a format writes: its own for a `SyntaxFormat`, the equivalent one
    for the built-in formats (None for a format of another kind)."""
    if isinstance(fmt, SyntaxFormat):
        return fmt.syntax
    if fmt.name == "pycall":
        return CallSyntax("python", separator=fmt.separator)
    key = getattr(fmt, "arguments_key", None)
    if not isinstance(key, str):
        return None
    return CallSyntax(
        "json",
        call_open=fmt.open,
        call_close=fmt.close,
        separator=fmt.separator,
        arguments_key=key,
    )
