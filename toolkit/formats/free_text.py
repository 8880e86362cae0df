"""Tool calls in free text: model output written without a grammar.

A model left to itself often wraps its call in prose, a code fence or a sentence
(``Sure! {"name": ...}``), which a format's own `CallFormat.parse` refuses when the
format has no opening marker. `calls_in_text` reads the text with the format first and,
when that finds nothing, reads each JSON object or Python call in the text on its own.

calls_in_text(get_format("llama3"), 'Here: {"name":"f","parameters":{}}.') -> [ToolCall('f')]
"""

from __future__ import annotations

import re

from toolweave.errors import CallFormatError
from toolweave.formats.base import CallFormat, decode_json_at
from toolweave.formats.markers import closing_paren
from toolweave.toolspec import ToolCall

__all__ = ["MAX_CANDIDATES", "calls_in_text"]

#: Most places in one text tried as the start of a call.
MAX_CANDIDATES = 256

_PYCALL = re.compile(r"(?<![\w.])[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\(")


def calls_in_text(fmt: CallFormat, text: str) -> list[ToolCall]:
    """Every call `fmt` can read in ``text``, prose around and between them ignored.

    Raises `CallFormatError` only when the format's own reading fails and no call can
    be read anywhere in the text (the first error is reported)."""
    try:
        calls = fmt.parse(text)
    except CallFormatError as exc:
        calls, error = [], exc
    else:
        error = None
    if calls:
        return calls
    found: list[ToolCall] = []
    pos = 0
    for _ in range(MAX_CANDIDATES):
        span = _next_candidate(text, pos)
        if span is None:
            break
        start, end = span
        try:
            found.extend(fmt.parse(fmt.open + text[start:end] + fmt.close))
        except CallFormatError:
            pos = start + 1
            continue
        pos = end
    if found or error is None:
        return found
    raise error


def _next_candidate(text: str, pos: int) -> tuple[int, int] | None:
    """The next JSON object or Python call at or after ``pos`` that is well formed."""
    while pos < len(text):
        brace = text.find("{", pos)
        call = _PYCALL.search(text, pos)
        starts = [i for i in (brace, call.start() if call else -1) if i >= 0]
        if not starts:
            return None
        start = min(starts)
        try:
            if start == brace:
                _, end = decode_json_at(text, start)
            else:
                assert call is not None
                end = closing_paren(text, call.end() - 1)
        except CallFormatError:
            pos = start + 1
            continue
        return start, end
    return None
