"""How `ChatToolweave` answers LangChain's calls: `ChatStreaming`, the mixin with the
whole, streamed and async runs of a request (streams and async calls decode on a worker
thread and hand the events back through a queue), their message chunks, and the
observer's view of each decoding phase."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

from toolweave.adapters.langchain.early import active_runner
from toolweave.adapters.langchain.messages import ai_message, final_chunk
from toolweave.adapters.langchain.stream import CallStreamer
from toolweave.errors import ToolweaveError
from toolweave.events import (
    CallEvent,
    CallName,
    FinalCall,
    ModelDone,
    ModelStart,
    Observer,
    ProvisionalCallEvent,
)
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.results import CallResult

__all__ = ["ChatStreaming"]

_Event = tuple[CallEvent, ToolCaller | None]


class ChatStreaming:
    """The LangChain side of `ChatToolweave`'s requests: a mixin over the model's
    settings and its decoder (`ChatDecoding._decode`), declared below for type checking
    only, so that pydantic takes none of them for a field of its own."""

    if TYPE_CHECKING:
        mode: str
        observer: Observer | None

        @property
        def engine(self) -> Engine: ...

        @property
        def model_name(self) -> str: ...

        def _decode(
            self,
            messages: Sequence[BaseMessage],
            emit: Callable[[CallEvent, ToolCaller | None], None],
            **kwargs: Any,
        ) -> None: ...

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        streamer = CallStreamer(self.engine, active_runner())
        results: list[CallResult] = []

        def handle(ev: CallEvent, caller: ToolCaller | None) -> None:
            streamer.feed(ev, caller)
            self._observe(ev)
            if ev.kind == "done" and ev.result is not None:
                results.append(ev.result)

        self._observe_start()
        self._decode(messages, handle, stop=stop, **kwargs)
        if not results:  # pragma: no cover - decoders always end with 'done'
            raise ToolweaveError("decoder ended without a result")
        message = ai_message(results[-1], model_name=self.model_name, ids=streamer.ids)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def event_producer(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: Mapping[str, Any]
    ) -> Callable[[Callable[[_Event], None]], None]:
        """What a stream's worker thread runs: the whole decode, emitting each event with
        the tool caller that made it (None for text and JSON). Streams and `toolweave
        serve` run it on a worker thread of their own."""

        def produce(emit: Callable[[_Event], None]) -> None:
            self._decode(messages, lambda ev, caller: emit((ev, caller)), stop=stop, **kwargs)

        return produce

    def _chunks(
        self, streamer: CallStreamer, ev: CallEvent, caller: ToolCaller | None
    ) -> Iterator[ChatGenerationChunk]:
        self._observe(ev)
        for chunk in streamer.feed(ev, caller):
            if ev.kind == "done" and ev.result is not None:
                chunk = final_chunk(chunk, ev.result, self.model_name)
            yield ChatGenerationChunk(message=chunk)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        from toolweave.adapters.langchain.blocking import stream_in_worker

        streamer = CallStreamer(self.engine, active_runner())
        self._observe_start()
        for ev, caller in stream_in_worker(self.event_producer(messages, stop, kwargs)):
            for chunk in self._chunks(streamer, ev, caller):
                text = chunk.message.content
                if run_manager and isinstance(text, str) and text:
                    run_manager.on_llm_new_token(text, chunk=chunk)
                yield chunk

    def _observe_start(self) -> None:
        if self.observer is not None:
            self.observer(ModelStart(self.mode))

    def _observe(self, ev: CallEvent) -> None:
        if self.observer is None:
            return
        if ev.kind == "name":
            self.observer(CallName(ev.name or "", ev.t_ms))
        elif ev.kind == "provisional" and ev.call is not None:
            self.observer(ProvisionalCallEvent(ev.call, ev.t_ms))
        elif ev.kind == "call" and ev.call is not None:
            self.observer(FinalCall(ev.call, ev.t_ms))
        elif ev.kind == "done" and ev.result is not None:
            self.observer(ModelDone.of(ev.result))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        from toolweave.adapters.langchain.blocking import run_in_worker

        return await run_in_worker(self._generate, messages, stop, None, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        from toolweave.adapters.langchain.blocking import astream_in_worker

        streamer = CallStreamer(self.engine, active_runner())
        self._observe_start()
        async for ev, caller in astream_in_worker(self.event_producer(messages, stop, kwargs)):
            for chunk in self._chunks(streamer, ev, caller):
                text = chunk.message.content
                if run_manager and isinstance(text, str) and text:
                    await run_manager.on_llm_new_token(text, chunk=chunk)
                yield chunk
