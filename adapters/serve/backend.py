"""The engine side of the server: a `ChatRequest` in, `Delta`s out.

Requests decode through `ChatToolweave`'s own decoding (the tool-call fast path in the
server's mode, text, JSON under a schema) on its worker thread, so cancelling the
consuming task stops decoding at the next forward pass. Every request shares one engine
and one `StateStore`, so each conversation starts from the longest prefix already
computed (its previous turn, or the shared system prompt and tool list). A chat model
is kept per ``max_tokens`` value (its tool callers compile once per tool set).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from toolweave.adapters.langchain.blocking import astream_in_worker
from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.stream import CallStreamer
from toolweave.adapters.serve.protocol import ApiError, ChatRequest
from toolweave.adapters.serve.responses import (
    ArgsDelta,
    CallStart,
    Delta,
    Finish,
    StopHoldback,
    TextDelta,
)
from toolweave.models import resolve_model

__all__ = ["Backend"]

#: Chat models kept (one per distinct ``max_tokens`` asked for).
_MODELS_KEPT = 8


class Backend:
    """One model file served in one decoding mode (see the module doc)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        mode: str = "lossless",
        n_ctx: int = 8192,
        max_tokens: int = 512,
        max_calls: int | None = 1,
        auto_calls: Literal["model", "user_turn"] = "model",
        state_store: Any = None,
        reuse_prompt_cache: bool = True,
    ) -> None:
        self.path = resolve_model(model)
        self.mode = mode
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.max_calls = max_calls
        self.auto_calls: Literal["model", "user_turn"] = auto_calls
        self.state_store = state_store
        self.reuse_prompt_cache = reuse_prompt_cache
        self._models: OrderedDict[int, ChatToolweave] = OrderedDict()
        self._lock = threading.Lock()
        self.chat(max_tokens)  # checks the mode and options now, not at the first request
        self.names = {self.model_id, self.path.name, self.path.stem}
        if model:
            self.names.add(model)

    @property
    def model_id(self) -> str:
        """The id `/v1/models` lists (the model file's name without its suffix)."""
        return Path(self.path).stem

    def load(self) -> None:
        """Load the engine and measure its cost table now (both otherwise happen on the
        first request, which would wait seconds for them)."""
        from toolweave.native.calibration import engine_costs

        engine = self.chat(self.max_tokens).engine
        if self.mode in ("fast", "lossless"):
            engine_costs(engine)

    def chat(self, max_tokens: int | None) -> ChatToolweave:
        """The chat model decoding at most `max_tokens` tokens (default: the server's)."""
        n = max_tokens or self.max_tokens
        with self._lock:
            found = self._models.get(n)
            if found is None:
                found = ChatToolweave(
                    model=str(self.path),
                    mode=self.mode,
                    n_ctx=self.n_ctx,
                    max_tokens=n,
                    max_calls=self.max_calls,
                    auto_calls=self.auto_calls,
                    state_store=self.state_store,
                    reuse_prompt_cache=self.reuse_prompt_cache,
                )
                self._models[n] = found
                while len(self._models) > _MODELS_KEPT:
                    self._models.popitem(last=False)
            else:
                self._models.move_to_end(n)
            return found

    def check_model(self, name: str) -> None:
        if name not in self.names:
            raise ApiError(
                f"The model {name!r} does not exist: this server serves {self.model_id!r}",
                status=404,
                param="model",
                code="model_not_found",
            )

    async def deltas(self, request: ChatRequest) -> AsyncIterator[Delta]:
        """Decode `request`; the last delta is its `Finish`."""
        chat = self.chat(request.max_tokens)
        streamer = CallStreamer(chat.engine)
        holdback = StopHoldback(request.stop)
        produce = chat.event_producer(
            list(request.messages), list(request.stop) or None, dict(request.options)
        )
        started = 0
        store = chat.state_store if chat.reuse_prompt_cache else None
        before = None if store is None else store.last
        async for ev, caller in astream_in_worker(produce):
            for piece in streamer.feed(ev, caller):
                text = piece.content
                if isinstance(text, str) and text and ev.kind != "done":
                    safe = holdback.push(text)
                    if safe:
                        yield TextDelta(safe)
                for c in piece.tool_call_chunks:
                    index = c.get("index") or 0
                    if c.get("name") and index >= started:
                        started = index + 1
                        yield CallStart(index, str(c.get("id")), str(c["name"]))
                    if c.get("args"):
                        yield ArgsDelta(index, str(c["args"]))
            if ev.kind == "done" and ev.result is not None:
                result = ev.result
                if not result.calls and not streamer.ids:
                    rest = holdback.end(result.text)
                    if rest:
                        yield TextDelta(rest)
                reason = result.finish_reason
                if streamer.ids and reason == "stop":
                    reason = "tool_calls"
                cached = result.stats.cached_tokens
                record = None if store is None else store.last
                if record is not None and record is not before:
                    # The store put the prompt in place before the decoder ran: what was
                    # reused from earlier requests is its count, not the decoder's.
                    cached = min(record.reused, result.stats.prompt_tokens)
                yield Finish(
                    reason=reason,
                    prompt_tokens=result.stats.prompt_tokens,
                    completion_tokens=len(result.tokens),
                    cached_tokens=cached,
                )
                return
