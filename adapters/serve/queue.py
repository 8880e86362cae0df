"""A fair, bounded queue in front of the one engine.

Requests decode one at a time, in arrival order. `EngineQueue.slot()` admits the
caller at once when the engine is free, otherwise queues it behind the others; a
queue already holding `max_waiting` requests refuses more (`QueueFullError`), and a
request that waited `wait_timeout_s` gives up (`QueueTimeoutError`). A waiter that is
cancelled leaves the queue; a slot granted to a request cancelled at that very moment
passes to the next one, so no slot is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator

__all__ = ["EngineQueue", "QueueFullError", "QueueTimeoutError"]


class QueueFullError(Exception):
    """The queue holds as many waiting requests as it may."""


class QueueTimeoutError(Exception):
    """A request waited longer than the queue's timeout."""


class EngineQueue:
    """FIFO admission to one engine (see the module doc). Use from one event loop."""

    def __init__(self, max_waiting: int = 32, wait_timeout_s: float = 300.0) -> None:
        if max_waiting < 0:
            raise ValueError("max_waiting must be at least 0")
        if wait_timeout_s <= 0:
            raise ValueError("wait_timeout_s must be positive")
        self.max_waiting = max_waiting
        self.wait_timeout_s = wait_timeout_s
        self._busy = False
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Requests queued behind the one decoding."""
        return sum(1 for w in self._waiters if not w.done())

    @property
    def busy(self) -> bool:
        return self._busy

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold the engine for the body of the ``async with``."""
        await self._acquire()
        try:
            yield
        finally:
            self._release()

    async def _acquire(self) -> None:
        if not self._busy and not self.waiting:
            self._busy = True
            return
        if self.waiting >= self.max_waiting:
            raise QueueFullError(
                f"{self.waiting} requests are already waiting for the engine (the limit)"
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.wait_timeout_s)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if waiter.done() and not waiter.cancelled():
                self._release()  # granted as we gave up: hand it on
            else:
                waiter.cancel()
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)
            if isinstance(exc, TimeoutError):
                raise QueueTimeoutError(
                    f"waited {self.wait_timeout_s:g} s for the engine without a turn"
                ) from None
            raise

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes on; _busy stays True
                return
        self._busy = False
