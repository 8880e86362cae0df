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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolweave.errors import CallFormatError
from toolweave.formats.base import CallFormat, dump_json
from toolweave.formats.markers import CALL_ID, INDEX, default_call_id, marker_pattern, slots
from toolweave.formats.pycall import PyCallFormat
from toolweave.formats.syntax_reader import SyntaxReader, xml_value
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

#: The one argument of the call written to find a call's head (`SyntaxFormat.head_at`).
_HEAD_SENTINEL = "__toolweave_head__"


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
        self._reader = SyntaxReader(syntax, self.tools)

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
        return self._reader.parse(text)


def _xml_text(value: Any) -> str:
    return value if isinstance(value, str) else dump_json(value)


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
