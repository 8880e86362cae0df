"""Markers of a call syntax: the `INDEX` and `CALL_ID` placeholders, the regex text a
marker matches (whitespace-lenient), compiled markers, and the text scans the readers
share (whitespace, a balanced parenthesis)."""

from __future__ import annotations

import re

from toolweave.errors import CallFormatError

__all__ = [
    "CALL_ID",
    "INDEX",
    "Marker",
    "anchor",
    "closing_paren",
    "default_call_id",
    "marker_pattern",
    "skip_ws",
    "slots",
]

#: Stands for the call's position (0, 1, ...) inside a marker.
INDEX = "\x1e"
#: Stands for the call's id inside a marker.
CALL_ID = "\x1f"


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


class Marker:
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


def anchor(opening: str) -> str:
    """The last tag of a multi-tag opening: what a model writes even after its own
    reasoning (``<|START_THINKING|><|END_THINKING|><|START_ACTION|>`` -> the last one)."""
    text = opening.strip()
    cuts = [m.start() for m in re.finditer(r"(?<=[>\]])<", text)]
    return text[cuts[-1] :] if cuts else text


def slots(marker: str, index: int) -> str:
    """`marker` as written for the call at ``index``: its `INDEX` and `CALL_ID` filled."""
    return marker.replace(INDEX, str(index)).replace(CALL_ID, default_call_id(index))


def default_call_id(index: int) -> str:
    """The id of the call at ``index`` of a message when it has none of its own: nine
    letters and digits (what Mistral's templates insist on)."""
    return f"call{index:05d}"


def skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def closing_paren(text: str, pos: int) -> int:
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
