"""Incremental reading of tool calls from streamed model output.

`CallStream` takes the text as it arrives and reports each call as soon as its parts are
known: the tool name once it is written out, then the argument text as it grows, then
the finished `ToolCall`. Argument deltas are the raw text of the arguments in the
model's syntax (JSON for the JSON layouts), never text of a marker that may still turn
out to close the call.

stream = CallStream(fmt); stream.feed('<tool_call>{"name":"f","argu') -> [CallDelta(0, 'f')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolweave.errors import CallFormatError
from toolweave.formats.base import CallFormat
from toolweave.formats.syntax import syntax_of
from toolweave.formats.syntax_reader import SyntaxReader
from toolweave.toolspec import ToolCall

__all__ = ["MAX_STREAM_CHARS", "CallDelta", "CallStream"]

#: Most text one stream holds; more is a `CallFormatError` (a runaway response).
MAX_STREAM_CHARS = 1_000_000

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")


@dataclass(frozen=True)
class CallDelta:
    """News about call ``index``: its ``name`` when first known, new argument text, or
    the finished ``call``."""

    index: int
    name: str | None = None
    arguments: str = ""
    call: ToolCall | None = None


class CallStream:
    """Feed chunks of one response; get `CallDelta`s as the calls take shape.

    Built-in formats are read as the `CallSyntax` they write (`syntax_of`); ``finish``
    parses the whole text with the format itself and returns the calls.
    """

    def __init__(self, fmt: CallFormat, *, max_chars: int = MAX_STREAM_CHARS) -> None:
        self.fmt = fmt
        self._syntax = syntax_of(fmt)
        self._reader = SyntaxReader(self._syntax, {}) if self._syntax is not None else None
        self.max_chars = max_chars
        self.text = ""
        self._pos = 0  # where the next call is looked for
        self._body = -1  # start of the current call's body, -1 outside a call
        self._args = -1  # start of its arguments, -1 before its name is known
        self._sent = 0  # argument text already reported
        self._index = 0

    def feed(self, chunk: str) -> list[CallDelta]:
        """Add ``chunk``; return what became known."""
        self.text += chunk
        if len(self.text) > self.max_chars:
            raise CallFormatError(f"streamed response longer than {self.max_chars} characters")
        out: list[CallDelta] = []
        if self._reader is None:
            return out
        while self._step(out):
            pass
        return out

    def finish(self) -> list[ToolCall]:
        """Every call of the whole response (`CallFormatError` on malformed text)."""
        return self.fmt.parse(self.text)

    # ------------------------------------------------------------------ steps
    def _step(self, out: list[CallDelta]) -> bool:
        reader = self._reader
        assert reader is not None and self._syntax is not None
        text = self.text
        if self._body < 0:
            marker = reader.next if self._index and not reader.next.blank else reader.start
            if marker.blank:  # calls follow each other with only whitespace between
                rest = text[self._pos :]
                if not rest.strip():
                    return False
                self._body = self._pos + len(rest) - len(rest.lstrip())
                return True
            span = marker.search(text, self._pos)
            if span is None:
                return False
            self._body = span[1]
            return True
        if self._args < 0:
            found = self._name(text, self._body)
            if found is None:
                return False
            name, self._args = found
            self._sent = self._args
            out.append(CallDelta(self._index, name=name))
            return True
        try:
            call, end = reader.read_call(text, self._body)
        except CallFormatError:
            call, end = None, -1
        closed = call is not None and self._closed(text, end)
        stop = end if closed else self._safe_end(text)
        if self._syntax is not None and self._syntax.layout == "json":
            # The object around the arguments closes after them: its brace is not theirs.
            stop = text.rindex("}", 0, end) if closed else len(text[:stop].rstrip("} \n\t"))
        if stop > self._sent:
            out.append(CallDelta(self._index, arguments=text[self._sent : stop]))
            self._sent = stop
        if not closed or call is None:
            return False
        out.append(CallDelta(self._index, call=call))
        self._index += 1
        self._pos, self._body, self._args = end, -1, -1
        return True

    def _name(self, text: str, pos: int) -> tuple[str, int] | None:
        s = self._syntax
        assert s is not None
        if s.layout == "json":
            key = re.escape(s.name_key) if s.name_key else None
            pattern = (
                rf'"{key}"\s*:\s*"([^"\\]+)"\s*,\s*"{re.escape(s.arguments_key)}"\s*:'
                if key
                else r'\{\s*"([^"\\]+)"\s*:'
            )
            found = re.compile(pattern).search(text, pos)
            return None if found is None else (found.group(1), found.end())
        start = pos + len(text[pos:]) - len(text[pos:].lstrip())
        found = _NAME.match(text, start)
        if found is None or found.end() == len(text):
            return None  # the name may go on
        if s.layout == "python":
            return found.group(), found.end()
        reader = self._reader
        assert reader is not None
        after = reader.name_close.match(text, found.end())
        if after is None:
            return (found.group(), found.end()) if reader.name_close.blank else None
        return found.group(), after

    def _closed(self, text: str, end: int) -> bool:
        """Whether the call read up to ``end`` is over: a marker after it says so."""
        reader = self._reader
        assert reader is not None and self._syntax is not None
        if self._syntax.layout in ("json", "named-json", "python"):
            return True  # a JSON object or a call ends where its brackets close
        for marker in (reader.call_close, reader.next, reader.end):
            if not marker.blank and marker.match(text, end) is not None:
                return True
        return False

    def _safe_end(self, text: str) -> int:
        """End of the text that cannot be the start of a marker ending the value."""
        reader = self._reader
        assert reader is not None
        markers = [m.text.strip() for m in (reader.value_close, reader.end, reader.next)]
        keep = len(text)
        for marker in markers:
            for size in range(min(len(marker), len(text) - self._sent), 0, -1):
                if text.endswith(marker[:size]):
                    keep = min(keep, len(text) - size)
                    break
        return max(keep, self._sent)
