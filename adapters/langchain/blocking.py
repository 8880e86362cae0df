"""Run the blocking decoders on a worker thread, cancellably.

A request decodes on one worker thread from start to end, holding the engine lock
only there; its events come back through a queue, so a consumer that pauses, stops or
iterates from another thread never holds the engine. The worker runs in a copy of the
caller's context variables under a `cancel_scope`: closing a stream, or cancelling the
awaiting task (``task.cancel()``, ``asyncio.wait_for``), sets the scope's flag, and the
decoder stops at its next forward pass, frees its sequences and the lock. The
cancelled side waits for that (at most `JOIN_S` seconds), so when it returns the next
request can start and no orphan thread is still decoding.

The queue holds at most one response's events (a decoder is bounded by its
``max_tokens``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from toolweave.errors import EngineError
from toolweave.native.concurrency import cancel_scope, check_cancelled

__all__ = ["JOIN_S", "astream_in_worker", "run_in_worker", "stream_in_worker"]

T = TypeVar("T")

#: How long a cancelled or closed side waits for its worker to stop (one forward pass,
#: in practice milliseconds).
JOIN_S = 30.0

Emit = Callable[[T], None]


def _start(
    cancel: threading.Event, body: Callable[[], None], on_exit: Callable[[], None]
) -> threading.Thread:
    """`body()` on a daemon thread in a copy of this context, under `cancel`."""
    ctx = contextvars.copy_context()

    def run() -> None:
        try:
            with cancel_scope(cancel):
                check_cancelled()  # cancelled before it started: nothing to decode
                body()
        finally:
            on_exit()

    worker = threading.Thread(target=ctx.run, args=(run,), daemon=True, name="toolweave-decode")
    worker.start()
    return worker


async def run_in_worker(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` on a worker thread; cancelling the awaiting task stops it
    at its next forward pass, and returns only once it has stopped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    cancel = threading.Event()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def deliver(ok: bool, value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(settle, ok, value)

    def body() -> None:
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:
            deliver(False, exc)
        else:
            deliver(True, value)

    finished = asyncio.Event()

    def on_exit() -> None:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(finished.set)

    _start(cancel, body, on_exit)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        cancel.set()
        future.add_done_callback(_retrieve)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(finished.wait(), JOIN_S)
        raise


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # the worker's DecodeCancelledError: expected, not lost


def stream_in_worker(produce: Callable[[Emit[T]], None]) -> Iterator[T]:
    """Run `produce(emit)` on a worker thread and yield what it emits, in order.

    Closing the iterator (or dropping it) cancels the worker and waits for it to stop."""
    items: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    cancel = threading.Event()

    def body() -> None:
        try:
            produce(lambda item: items.put(("item", item)))
        except BaseException as exc:
            items.put(("error", exc))
        else:
            items.put(("end", None))

    worker = _start(cancel, body, lambda: items.put(("exit", None)))
    try:
        while True:
            kind, item = items.get()  # the worker always ends with "exit"
            if kind == "exit":
                raise EngineError("the decoding thread ended without a result")
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        cancel.set()
        if worker is not threading.current_thread():
            worker.join(JOIN_S)


async def astream_in_worker(produce: Callable[[Emit[T]], None]) -> AsyncIterator[T]:
    """`stream_in_worker` for async code: the event loop never blocks on the worker."""
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    cancel = threading.Event()
    finished = asyncio.Event()

    def put(kind: str, item: Any) -> None:
        try:
            loop.call_soon_threadsafe(items.put_nowait, (kind, item))
        except RuntimeError:  # the loop is closed: nobody is listening any more
            cancel.set()
            check_cancelled()

    def body() -> None:
        try:
            produce(lambda item: put("item", item))
        except BaseException as exc:
            put("error", exc)
        else:
            put("end", None)

    def on_exit() -> None:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(items.put_nowait, ("exit", None))
            loop.call_soon_threadsafe(finished.set)

    _start(cancel, body, on_exit)
    try:
        while True:
            kind, item = await items.get()  # the worker always ends with "exit"
            if kind == "exit":
                raise EngineError("the decoding thread ended without a result")
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        cancel.set()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(finished.wait(), JOIN_S)
