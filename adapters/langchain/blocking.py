"""Run the blocking decoders from async code without blocking the event loop.

Decoding holds the engine lock and runs llama.cpp for seconds, so async entry points
hand it to a worker thread (with the caller's context variables) and await the result;
streams come back through a queue. Cancelling the awaiting task stops the worker at the
next event and closes the decoder, which frees its sequences and the engine lock.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

__all__ = ["iterate_in_worker", "run_in_worker"]

T = TypeVar("T")

_END = object()


async def run_in_worker(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` on a worker thread (asyncio.to_thread copies the context)."""
    return await asyncio.to_thread(fn, *args, **kwargs)


async def iterate_in_worker(
    fn: Callable[..., Iterator[T]], /, *args: Any, **kwargs: Any
) -> AsyncIterator[T]:
    """Iterate `fn(*args, **kwargs)` on a worker thread, yielding its items here."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    stop = threading.Event()
    ctx = contextvars.copy_context()

    def produce() -> None:
        iterator = fn(*args, **kwargs)
        try:
            for item in iterator:
                if stop.is_set():
                    break
                loop.call_soon_threadsafe(queue.put_nowait, (True, item))
        except BaseException as exc:  # delivered to the awaiting side
            loop.call_soon_threadsafe(queue.put_nowait, (False, exc))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()
            loop.call_soon_threadsafe(queue.put_nowait, (True, _END))

    worker = threading.Thread(target=ctx.run, args=(produce,), daemon=True, name="toolweave-decode")
    worker.start()
    try:
        while True:
            ok, item = await queue.get()
            if not ok:
                raise item
            if item is _END:
                return
            yield item
    finally:
        stop.set()
