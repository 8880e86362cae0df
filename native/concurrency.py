"""The engine's lock and request cancellation.

`EngineLock` is re-entrant like `threading.RLock`, but it belongs to the *frames* that
took it, not to a thread. A decoder generator holds it from its first event to its
last (its sequences must not change in between), so:

- a generator resumed on another thread keeps the lock (the frame moved, the lease
  follows it) instead of deadlocking on its own lock;
- a caller that finds the lock held by a generator suspended at a `yield` (a stream
  that was neither finished nor closed) does not wait forever, and does not slip in
  re-entrantly on the same thread and overwrite the stream's sequences: after one
  garbage collection (which closes unreachable streams) it raises `EngineBusyError`
  at once on the thread that owns the stream, or after `park_timeout` seconds of
  continuous suspension on any other thread.

`cancel_scope(event)` marks the current context's work as cancellable: every forward
pass checks the event first (`check_cancelled`) and raises `DecodeCancelledError`, so a
cancelled request stops between two passes and unwinds its decoders (which free their
sequences and the lock).
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import inspect
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType, TracebackType

from toolweave.errors import DecodeCancelledError, EngineBusyError

__all__ = [
    "DecodeCancelledError",
    "EngineBusyError",
    "EngineLock",
    "cancel_scope",
    "check_cancelled",
]

_SUSPENDABLE = (
    inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
    | inspect.CO_ITERABLE_COROUTINE
)
#: How often a waiter re-checks a held lock (it is woken at once on release anyway).
_POLL_S = 0.05


_cancel: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "toolweave_cancel", default=None
)


@contextlib.contextmanager
def cancel_scope(event: threading.Event) -> Iterator[threading.Event]:
    """Forward passes run in this context stop with `DecodeCancelledError` once
    `event` is set."""
    token = _cancel.set(event)
    try:
        yield event
    finally:
        _cancel.reset(token)


def check_cancelled() -> None:
    """Raise `DecodeCancelledError` if the current context's request was cancelled."""
    event = _cancel.get()
    if event is not None and event.is_set():
        raise DecodeCancelledError("the request was cancelled")


class _Hold:
    """One acquisition: the frame that took the lock, the thread it last ran on, and
    whether that frame can be suspended (a generator or coroutine)."""

    __slots__ = ("frame", "suspendable", "thread")

    def __init__(self, frame: FrameType, thread: threading.Thread) -> None:
        self.frame = frame
        self.thread = thread
        self.suspendable = bool(frame.f_code.co_flags & _SUSPENDABLE)


def _stack_ids(frame: FrameType | None) -> set[int]:
    out: set[int] = set()
    while frame is not None:
        out.add(id(frame))
        frame = frame.f_back
    return out


class EngineLock:
    """A re-entrant lock owned by the frames holding it (see the module doc)."""

    def __init__(self, *, park_timeout: float = 5.0) -> None:
        self.park_timeout = park_timeout
        self._mutex = threading.Lock()  # guards `_holds`; `_cond` waits on it
        self._cond = threading.Condition(self._mutex)
        self._holds: list[_Hold] = []

    # ------------------------------------------------------------------ the RLock API
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._acquire(sys._getframe(1), blocking, timeout)

    def release(self) -> None:
        self._release(sys._getframe(1))

    def __enter__(self) -> bool:
        return self._acquire(sys._getframe(1), True, -1)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._release(sys._getframe(1))

    def locked(self) -> bool:
        with self._mutex:
            return bool(self._holds)

    # ------------------------------------------------------------------ internals
    def _acquire(self, frame: FrameType, blocking: bool, timeout: float) -> bool:
        me = threading.current_thread()
        with self._mutex:  # the uncontended and re-entrant cases
            if not self._holds or self._nested(me):
                self._holds.append(_Hold(frame, me))
                return True
            if not blocking:
                return False
        deadline = None if timeout < 0 else time.monotonic() + timeout
        parked_since: float | None = None
        collected = False
        with self._cond:
            while True:
                if not self._holds or self._nested(me):
                    self._holds.append(_Hold(frame, me))
                    return True
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return False
                if self._parked():
                    parked_since = now if parked_since is None else parked_since
                    mine = any(h.thread is me for h in self._holds)
                    if mine or now - parked_since >= self.park_timeout:
                        if not collected:  # an unreachable stream is closed by the collector
                            collected = True
                            self._cond.release()
                            try:
                                gc.collect()
                            finally:
                                self._cond.acquire()
                            continue
                        raise EngineBusyError(
                            "the engine is held by a paused stream (a decoder generator "
                            "neither finished nor closed): finish or close it first"
                        )
                else:
                    parked_since = None
                wait = _POLL_S if deadline is None else max(0.0, min(_POLL_S, deadline - now))
                self._cond.wait(wait)

    def _release(self, frame: FrameType) -> None:
        with self._mutex:
            holds = self._holds
            if holds and holds[-1].frame is frame:  # the usual case: a `with` block ends
                holds.pop()
                if not holds:
                    self._cond.notify_all()
                return
            self._release_other(frame)

    def _release_other(self, frame: FrameType) -> None:
        """Release a hold taken out of order or by another function (`_mutex` held)."""
        me = threading.current_thread()
        if not self._holds:
            raise RuntimeError("release of an engine lock that is not held")
        at = next(
            (i for i in range(len(self._holds) - 1, -1, -1) if self._holds[i].frame is frame),
            None,
        )
        if at is None:  # acquired in one function, released in another
            stack = _stack_ids(sys._getframe(1))
            at = next(
                (
                    i
                    for i in range(len(self._holds) - 1, -1, -1)
                    if id(self._holds[i].frame) in stack
                ),
                None,
            )
            if at is None and self._nested(me):
                at = len(self._holds) - 1
        if at is None:
            raise RuntimeError("the engine lock is held by another caller")
        del self._holds[at]
        if not self._holds:
            self._cond.notify_all()

    def _nested(self, me: threading.Thread) -> bool:
        """Whether the caller runs inside a holder (so taking the lock again is re-entry).

        A plain function holding it on this thread is on this thread's stack; a
        generator holder may be suspended or running elsewhere, so it is looked up on
        this thread's stack (and adopted by this thread when found there)."""
        holds = self._holds
        for h in holds:
            if h.thread is me and not h.suspendable:
                return True
        by_frame = {id(h.frame): h for h in holds}
        f: FrameType | None = sys._getframe(2)
        while f is not None:  # the nearest holder is usually a few frames up
            found = by_frame.get(id(f))
            if found is not None:
                if found.thread is not me:  # moved here: this thread runs the holders now
                    stack = _stack_ids(f)
                    for h in holds:
                        if id(h.frame) in stack:
                            h.thread = me
                return True
            f = f.f_back
        return False

    def _parked(self) -> bool:
        """No holder is running on any thread (all are suspended generators)."""
        running: set[int] = set()
        for top in sys._current_frames().values():
            running |= _stack_ids(top)
        return not any(id(h.frame) in running for h in self._holds)
