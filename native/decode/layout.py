"""How tool calls sit in a response's text under a call format: each tool's head (the text
up to a call's first argument key) and tail (after its last argument), per position where
a syntax numbers its calls, what ends a call, and a later call's text read as the first
call reads."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from toolweave.formats import CallFormat, SyntaxFormat
from toolweave.formats.syntax import CALL_ID, INDEX
from toolweave.toolspec import ToolCall

__all__ = ["ARGUMENTS_SENTINEL", "CallLayout"]

#: The argument name a call is serialized with to find its head and tail.
ARGUMENTS_SENTINEL = "__toolweave_arguments__"


def _after_slots(marker: str) -> str:
    """The fixed end of `marker`: its text after the last index or id it holds."""
    return re.split(f"[{INDEX}{CALL_ID}]", marker)[-1].strip()


class CallLayout:
    """The call layout of `fmt` for the tools named `names`."""

    def __init__(self, fmt: CallFormat, names: Iterable[str]) -> None:
        self.fmt = fmt
        self._names = tuple(names)
        # How calls sit in the response. A built-in format wraps each call in its open and
        # close; a syntax read off a template opens and closes the whole response once
        # (`SyntaxFormat`): a later call's text is read as if it were the first one.
        self._reply_open, self._reply_close = "", ""
        self._between = fmt.separator
        self.call_ends: tuple[str, ...] = (fmt.close or "}",)
        if isinstance(fmt, SyntaxFormat):
            syn = fmt.syntax
            self._reply_open, self._reply_close = syn.open, syn.close
            self._between = syn.separator
            # What ends a call: its closing marker after any index or id it holds.
            ends = {_after_slots(syn.call_close) or "}", _after_slots(fmt.close)} - {""}
            self.call_ends = tuple(sorted(ends))
        heads = {name: self._head(name) for name in self._names}
        # A syntax writing each call's id by its position has heads per position.
        self._positional = isinstance(fmt, SyntaxFormat) and fmt.syntax.positional
        self._heads_by_index: dict[int, dict[str, tuple[str, str]]] = {0: heads}

    @property
    def first_heads(self) -> dict[str, tuple[str, str]]:
        """The heads and tails of the response's first call."""
        return self._heads_by_index[0]

    def heads(self, n_calls: int) -> dict[str, tuple[str, str]]:
        """The heads and tails of the call written after `n_calls` calls (by its position,
        where that changes them)."""
        index = n_calls if self._positional else 0
        if index not in self._heads_by_index:
            self._heads_by_index[index] = {name: self._head(name, index) for name in self._names}
        return self._heads_by_index[index]

    def _head(self, name: str, index: int = 0) -> tuple[str, str]:
        """(text up to the first argument key, text after the last argument) of a call
        written at position `index` of the response."""
        call = ToolCall(name, {ARGUMENTS_SENTINEL: 0})
        if index and isinstance(self.fmt, SyntaxFormat):
            text = self.fmt.serialize_call_at(call, index)
        else:
            text = self.fmt.serialize_call(call)
        marker = json.dumps(ARGUMENTS_SENTINEL) + ":0"
        i = text.index(marker)
        tail = text[i + len(marker) :]
        if self._reply_close and tail.endswith(self._reply_close):
            tail = tail[: -len(self._reply_close)]  # the call's own end, not the response's
        return text[:i], tail

    def call_text(self, full: str, start: int, n_calls: int) -> str:
        """The text of the call that starts at `start` of the response text `full` after
        `n_calls` calls."""
        t = full[start:]
        sep = self._between
        if n_calls and sep and t.startswith(sep):
            t = t[len(sep) :]
        if not n_calls:
            return t
        if isinstance(self.fmt, SyntaxFormat):
            return self._reply_open + t  # as the first call reads, for the heads
        return t.lstrip()
