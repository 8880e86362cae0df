"""Decoder events -> `AIMessageChunk`s, and early starts of read-only tools.

`CallStreamer` follows one response. Text answers stream as content deltas. Tool calls
stream as ``tool_call_chunks`` by index: the name (with the call's id) as soon as the
decoder decides it, then argument deltas, which are the raw JSON text of the arguments
as it is committed (values drafted in parallel arrive together at the write-back). The
concatenated deltas of a call are exactly its arguments text. Provisional and final
calls are handed to the agent's `ProvisionalRunner`, when one is active.
"""

from __future__ import annotations

import codecs
import json
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import ToolCallChunk

from toolweave.adapters.langchain.messages import call_id
from toolweave.events import CallEvent
from toolweave.grammar.call import JSON_LAYOUTS

if TYPE_CHECKING:
    from toolweave.adapters.langchain.provisional import ProvisionalRunner
    from toolweave.native.caller import ToolCaller
    from toolweave.native.engine import Engine

__all__ = ["CallStreamer"]

_DECODER = json.JSONDecoder()


class CallStreamer:
    """Turns the events of one response into message chunks (see the module doc)."""

    def __init__(self, engine: Engine, runner: ProvisionalRunner | None = None) -> None:
        self.engine = engine
        self.runner = runner
        self.ids: list[str] = []  # one per call whose name was decided, in order
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""
        self._sent_args: list[str] = []  # argument text already streamed, per call
        self._calls_done = 0

    def feed(self, ev: CallEvent, caller: ToolCaller | None) -> list[AIMessageChunk]:
        """The chunks `ev` produces (possibly none)."""
        if ev.kind in ("provisional", "call") and ev.call is not None and self.runner:
            self.runner.start(ev.call)
        if caller is None:
            return self._text_chunks(ev)
        return self._call_chunks(ev, caller)

    # ------------------------------------------------------------ text answers
    def _text_chunks(self, ev: CallEvent) -> list[AIMessageChunk]:
        if ev.kind == "tokens":
            delta = self._decode(ev, final=False)
            return [AIMessageChunk(content=delta)] if delta else []
        if ev.kind == "done":
            return [AIMessageChunk(content=self._decode(ev, final=True))]
        return []

    def _decode(self, ev: CallEvent, *, final: bool) -> str:
        if final:
            return self._utf8.decode(b"", final=True)
        return self._utf8.decode(b"".join(self.engine.token_bytes(t) for t in ev.tokens))

    # ------------------------------------------------------------ tool calls
    def _call_chunks(self, ev: CallEvent, caller: ToolCaller) -> list[AIMessageChunk]:
        out: list[ToolCallChunk] = []
        if ev.kind == "tokens":
            self._text += self._decode(ev, final=False)
        if ev.kind == "name" and ev.name is not None:
            index = len(self.ids)
            self.ids.append(call_id())
            self._sent_args.append("")
            out.append(ToolCallChunk(name=ev.name, args="", id=self.ids[-1], index=index))
        elif ev.kind in ("tokens", "call", "done") and self.ids:
            index = len(self.ids) - 1
            final = ev.kind != "tokens" or self._calls_done > index
            delta = self._args_delta(caller, index, final=ev.kind == "call" or final)
            if delta:
                out.append(ToolCallChunk(name=None, args=delta, id=None, index=index))
        if ev.kind == "call":
            self._calls_done += 1
        if not out and ev.kind != "done":
            return []
        return [AIMessageChunk(content="", tool_call_chunks=out)]

    def _args_delta(self, caller: ToolCaller, index: int, *, final: bool) -> str:
        """New argument text of call `index` since the last chunk."""
        fmt = caller.fmt
        layout = JSON_LAYOUTS.get(fmt.name)
        segments = self._text.split(fmt.open) if fmt.open else [self._text]
        if len(segments) < index + 2 and fmt.open:
            return ""
        segment = segments[index + 1] if fmt.open else segments[0]
        if layout is None:  # non-JSON formats: the arguments as JSON once the call is done
            if not final or self._sent_args[index]:
                return ""
            try:
                call = fmt.parse(fmt.open + segment)[0]
            except Exception:
                return ""
            text = json.dumps(dict(call.arguments), ensure_ascii=False, separators=(",", ":"))
            self._sent_args[index] = text
            return text
        marker = json.dumps(layout[1]) + ":"
        at = segment.find(marker)
        if at < 0:
            return ""
        start = at + len(marker)
        try:
            _, end = _DECODER.raw_decode(segment, start)
            args = segment[start:end]
        except json.JSONDecodeError:
            # Unfinished: hold back closing braces and whitespace that may end the call.
            args = segment[start:].rstrip().rstrip("}").rstrip()
        sent = self._sent_args[index]
        if not args.startswith(sent) or len(args) <= len(sent):
            return ""
        self._sent_args[index] = args
        return args[len(sent) :]
