"""Events: what a decoder reports while it answers (`CallEvent`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from toolweave.results import CallResult
from toolweave.toolspec import ToolCall

__all__ = ["CallEvent", "CallEventKind"]

CallEventKind = Literal["tokens", "name", "provisional", "call", "done"]


@dataclass(frozen=True)
class CallEvent:
    """Something that happened while answering, `t_ms` after decoding started.

    `kind` is one of 'tokens' (tokens appended; `decoded` False when prefilled), 'name'
    (the tool is decided), 'provisional' (a read-only call with its required arguments),
    'call' (a final call) and 'done' (the last event, carrying the `result`).
    """

    kind: CallEventKind
    t_ms: float
    tokens: tuple[int, ...] = ()
    decoded: bool = True
    call: ToolCall | None = None
    name: str | None = None
    result: CallResult | None = None
