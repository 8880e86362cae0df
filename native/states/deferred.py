"""Deferred state saves: waiting, off the request path, for an engine to fall quiet.

`StateStore.save_later` issues a ticket per sequence (the newest one wins) and runs
`DeferredSaves.run` on its writer thread, which waits for a quiet spell, makes the buffer
off the engine lock and then lets the store copy the state into it under the lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from toolweave.errors import EngineError
from toolweave.native.engine import Engine

__all__ = ["DeferredSaves"]

_LATER_WAIT_S = 2.0  # how long a deferred save waits for a quiet engine before giving up
_LATER_QUIET_S = 0.2  # the quiet spell (no forward pass) a deferred save waits for


class DeferredSaves:
    """The tickets of the deferred saves of one store, the newest per sequence."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._later: dict[tuple[int, int], int] = {}  # the newest deferred save per sequence

    def issue(self, engine: Engine, seq: int) -> int:
        """A new ticket for a deferred save of `seq`: it supersedes the earlier ones."""
        key = (id(engine), seq)
        with self._lock:
            ticket = self._later.get(key, 0) + 1
            self._later[key] = ticket
        return ticket

    def superseded(self, engine: Engine, seq: int, ticket: int) -> bool:
        with self._lock:
            return self._later.get((id(engine), seq)) != ticket

    def run(
        self,
        engine: Engine,
        seq: int,
        ticket: int,
        save: Callable[[Engine, int, bytearray], None],
    ) -> None:
        """Wait until `engine` has been quiet for `_LATER_QUIET_S`, then call
        `save(engine, seq, buffer)` under the engine lock; give up when a newer ticket
        came, when the engine stays busy longer than `_LATER_WAIT_S`, or is closed."""
        passes = -1
        deadline = time.monotonic() + _LATER_WAIT_S
        while passes != engine.counters.forward_passes:  # until a quiet spell
            if self.superseded(engine, seq, ticket) or time.monotonic() > deadline:
                return
            passes = engine.counters.forward_passes
            time.sleep(_LATER_QUIET_S)
        if self.superseded(engine, seq, ticket):
            return
        if not engine.lock.acquire(timeout=_LATER_WAIT_S):
            return
        try:
            if engine.released or not engine.seq_tokens.get(seq):
                return
            size = engine.state_size(seq)
        except EngineError:
            return  # closed meanwhile
        finally:
            engine.lock.release()
        # Zero-filled, so every page is made here, not under the lock; with room for a
        # few more tokens should a request slip in between.
        buf = bytearray(size + size // 16)
        if not engine.lock.acquire(timeout=_LATER_WAIT_S):
            return
        try:
            if self.superseded(engine, seq, ticket):
                return  # a newer request ended while this one waited: its save follows
            save(engine, seq, buf)
        except EngineError:
            return
        finally:
            engine.lock.release()
